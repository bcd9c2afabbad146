"""Every key a search-space YAML accepts, generated from the dataclasses that read them (never written by hand).

Each key is listed by its one dotted name (model.d_model, train.lr: a space's `run:` is the older spelling of the
data, model and train sections), with the short name of a setting that has one beside it (train.lr: learning_rate).
For each key: its type (the field's annotation), its default (what a space that omits it gets), its bounds (where
the dataclass's module keeps a BOUNDS table of Intervals, as model/train_config.py does), the name under `search:`
that searches it (where tuning/search/space.py can search it), whether searching it moves samples (so the sweep
aligns them, tuning/search/sample_alignment.py) and its one line of meaning (the field's own comment,
tuning/search/field_comments.py). `mamba-tune space keys` prints them; docs/space-keys.md is their page.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass
from types import UnionType
from typing import Any

import yaml

from tuning.search.field_comments import field_comments
from tuning.search.overrides import with_sets
from tuning.search.recipe import SECTIONS, TrainingRecipe
from tuning.search.sample_alignment import moves_samples
from tuning.search.scheduler_config import kind_taking
from tuning.search.searchable import ALIASES, searchable_settings, setting_name
from tuning.search.space import SweepSpace, parse_space
from tuning.yaml_io import ConfigError

PROBE_NAME = "FILE"  # the file a probing space is read as: a default equal to it is the file's own name
# The smallest space the parser takes: what it fills in around it are the defaults of the keys without one.
MINIMAL_SPACE = {"search": {"learning_rate": {"low": 1e-5, "high": 1e-3, "log": True}}}
# The same for probing whether a space may fix train.lr, which MINIMAL_SPACE searches (a setting both searched and
# fixed is refused for that reason alone)
OTHER_MINIMAL_SPACE = {"search": {"weight_decay": {"low": 1e-6, "high": 1e-1, "log": True}}}
SEARCH_ENTRY = "search.<name>"  # how the listing writes a search entry's key
REQUIRED = "(required)"  # the default of a key a space must give
FILE_NAME = "(the file's name)"  # the default of `name`: the space file's name without .yaml


@dataclass(frozen=True)
class SpaceKey:
    key: str  # the dotted name as a space writes it, e.g. train.lr
    type: str  # the field's annotation as its dataclass writes it, e.g. "int | None"
    default: str  # what a space that omits the key gets, as YAML writes it; "(required)" where nothing is
    bounds: str  # the rule a number must meet where a BOUNDS table gives one, e.g. "in (0, 1)"; "" where none
    searchable: str  # the names under `search:` that search this key, comma separated; "" where it cannot be
    meaning: str  # the field's own comment in its dataclass; "" where it has none (a test fails on that)
    owner: str  # the dataclass the key is a field of, e.g. model.train_config.TrainConfig
    moves_samples: bool = False  # searching it changes which bars a trial's samples are (the sweep aligns them)
    alias: str = ""  # the short name of the same setting, e.g. learning_rate for train.lr; "" where none

    @property
    def section(self) -> str:
        """The part of the space the key belongs to: "top level", "search", "scheduler", ..., "train"."""
        parts = self.key.split(".")
        return "top level" if len(parts) == 1 else parts[0]

    @property
    def named(self) -> str:
        """The key with its short name beside it, as the listing shows it: "train.lr (learning_rate)"."""
        return f"{self.key} ({self.alias})" if self.alias else self.key


def space_keys() -> tuple[SpaceKey, ...]:
    """Every key a space accepts: the top level, search entries, the sections in SweepSpace's order, then the run
    settings (data.*, model.*, train.*)."""
    top = parse_space(MINIMAL_SPACE, f"{PROBE_NAME}.yaml")
    hints = typing.get_type_hints(SweepSpace)
    comments = field_comments(SweepSpace)
    searchers = search_names()
    refused = refused_keys()
    top_level: list[SpaceKey] = []
    search: list[SpaceKey] = []
    sections: list[SpaceKey] = []
    for field in dataclasses.fields(SweepSpace):
        kind = _dataclass_in(hints[field.name])
        if field.name == "run":
            continue  # last: the run settings, after the sweep's own
        if field.name == "search":
            kinds = " | ".join(kind.__name__ for kind in _union_members(typing.get_args(hints[field.name])[-1]))
            search.append(SpaceKey(SEARCH_ENTRY, kinds, REQUIRED, "", "", comments[field.name], _name(SweepSpace)))
            search += _search_spec_keys(hints[field.name])
        elif kind is not None:
            sections += section_keys(field.name, kind, searchers, refused)
        else:
            default = getattr(top, field.name)
            shown = FILE_NAME if default == PROBE_NAME else yaml_text(default)
            top_level.append(SpaceKey(field.name, str(field.type), shown, "", "", comments[field.name],
                                      _name(SweepSpace)))
    keys = top_level + search + sections
    for section in SECTIONS:
        keys += section_keys(section, typing.get_type_hints(TrainingRecipe)[section], searchers, refused)
    return tuple(keys)


def search_names() -> dict[str, tuple[str, ...]]:
    """{<section>.<field>: the names under `search:` that search it}: its short name where it has one
    (learning_rate -> train.lr), then its dotted name (tuning/search/searchable.py)."""
    found: dict[str, list[str]] = {}
    for alias, name in ALIASES.items():
        found.setdefault(name, []).append(alias)
    for name in searchable_settings():
        found.setdefault(name, []).append(name)
    return {key: tuple(value) for key, value in found.items()}


def refused_keys() -> dict[str, str]:
    """{run setting: why} for the run settings a space may not set, the sweep setting them itself (train.epochs,
    from scheduler.max_epochs): each is set at its default on the smallest space, and the parser's refusal kept."""
    refused = {}
    for section in SECTIONS:
        kind = typing.get_type_hints(TrainingRecipe)[section]
        for field in dataclasses.fields(kind):
            names = (section, field.name)
            try:
                parse_space(with_sets(probe_space(".".join(names)), [(names, plain(_default_of(field)))]), "space")
            except ConfigError as exc:
                refused[".".join(names)] = str(exc).removeprefix("space: ")
    return refused


def probe_space(key: str) -> dict[str, Any]:
    """The smallest space on which the key `key` may be set: MINIMAL_SPACE, or another one for the setting
    MINIMAL_SPACE searches (train.lr), which a space may not both search and fix, or for a scheduler setting the
    default kind does not take (scheduler.brackets: a hyperband space)."""
    if key.startswith("scheduler."):  # a setting only some kinds take: on a space of the first that does
        return {**MINIMAL_SPACE, "scheduler": {"kind": kind_taking(key.removeprefix("scheduler."))}}
    searched = {setting_name(name) for name in MINIMAL_SPACE["search"]}
    return OTHER_MINIMAL_SPACE if setting_name(key) in searched else MINIMAL_SPACE


def yaml_text(value: Any) -> str:
    """A value as one line of YAML: 50, null, auto, [0.0, .inf], {}."""
    text = yaml.safe_dump(plain(value), default_flow_style=True, width=1_000_000).strip()
    return text.removesuffix("...").strip()


def plain(value: Any) -> Any:
    """A value as YAML writes it: dataclasses as their mappings (to_dict where they have one), tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(value.to_dict() if hasattr(value, "to_dict") else dataclasses.asdict(value))
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def section_keys(prefix: str, kind: type, searchers: dict[str, tuple[str, ...]] | None = None,
                 refused: dict[str, str] | None = None) -> list[SpaceKey]:
    """The keys of one section read by the dataclass `kind`, each named under `prefix`; a field that is itself a
    dataclass (a section within the section) listed key by key."""
    searchers, refused = searchers or {}, refused or {}
    comments = field_comments(kind)
    bounds = getattr(sys.modules[kind.__module__], "BOUNDS", {})
    try:
        hints = typing.get_type_hints(kind)
    except (NameError, TypeError):  # an annotation only a type checker resolves: no inner sections then
        hints = {}
    keys = []
    for field in dataclasses.fields(kind):
        key = f"{prefix}.{field.name}"
        inner = _dataclass_in(hints.get(field.name))
        if key in refused:
            continue
        if inner is not None:
            keys += section_keys(key, inner, searchers, refused)
            continue
        default = _default_of(field)
        shown = REQUIRED if default is dataclasses.MISSING else yaml_text(default)
        rule = str(bounds[field.name]) if field.name in bounds else ""
        keys.append(SpaceKey(key, str(field.type), shown, rule, ", ".join(searchers.get(key, ())),
                             comments[field.name], _name(kind), key in searchers and moves_samples(key),
                             ", ".join(alias for alias, name in ALIASES.items() if name == key)))
    return keys


def _search_spec_keys(search_type: Any) -> list[SpaceKey]:
    """search.<name>.low, .high, .log, .choices, ...: the fields of each kind of search entry SweepSpace holds."""
    keys: dict[str, SpaceKey] = {}
    for kind in _union_members(typing.get_args(search_type)[-1]):
        comments = field_comments(kind)
        for field in dataclasses.fields(kind):
            key = f"{SEARCH_ENTRY}.{field.name}"
            default = _default_of(field)
            shown = REQUIRED if default is dataclasses.MISSING else yaml_text(default)
            if key in keys:  # the same name in two kinds of entry: one row, both types
                first = keys[key]
                kinds = first.type if str(field.type) in first.type.split(" | ") else f"{first.type} | {field.type}"
                keys[key] = dataclasses.replace(first, type=kinds, owner=f"{first.owner}, {_name(kind)}")
            else:
                keys[key] = SpaceKey(key, str(field.type), shown, "", "", comments[field.name], _name(kind))
    return list(keys.values())


def _default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _union_members(annotation: Any) -> tuple[type, ...]:
    members = typing.get_args(annotation) if isinstance(annotation, UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    return tuple(member for member in members if dataclasses.is_dataclass(member))


def _dataclass_in(annotation: Any) -> type | None:
    """The dataclass an annotation names (ConfirmConfig | None -> ConfirmConfig), else None."""
    members = _union_members(annotation)
    return members[0] if len(members) == 1 else None


def _name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"
