"""--set KEY=VALUE: a setting of a search space or a run configuration, by its dotted name, over the file's.

The names are the file's own (scheduler.max_epochs, search.learning_rate.high, search.model.d_model.choices,
run.model.d_model in a space;
model.d_model, train.lr in a run configuration). A value is read as a number where it is one (3e-3 included, which
YAML would read as text), else as YAML (true, null, [32, 64], {low: 1, high: 4}). The result is validated exactly as
the file is, by whoever reads it.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tuning.errors import UsageError

SPEC_FIELDS = ("low", "high", "log", "step", "choices")  # the keys of a search entry (search_section.py)


def parse_sets(pairs: list[str]) -> list[tuple[tuple[str, ...], Any]]:
    """["scheduler.max_epochs=20"] -> [(("scheduler", "max_epochs"), 20)]; UsageError for a pair that is not
    KEY=VALUE with a dotted KEY of names."""
    sets = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        names = tuple(name.strip() for name in key.split("."))
        if not sep or not all(names):
            raise UsageError(f"--set {pair!r} is not KEY=VALUE with a dotted key, e.g. --set scheduler.max_epochs=20")
        sets.append((_search_entry(names), value_of(text.strip())))
    return sets


def _search_entry(names: tuple[str, ...]) -> tuple[str, ...]:
    """A search entry's name is dotted itself: search.model.d_model.choices -> (search, model.d_model, choices);
    search.model.d_model (the whole entry) -> (search, model.d_model)."""
    if names[0] != "search" or len(names) < 3:
        return names
    if names[-1] in SPEC_FIELDS:
        return ("search", ".".join(names[1:-1]), names[-1])
    return ("search", ".".join(names[1:]))


def value_of(text: str) -> Any:
    """'20' -> 20, '3e-3' -> 0.003, 'true' -> True, '[32, 64]' -> [32, 64], 'bf16' -> 'bf16'."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text


def with_sets(values: Any, sets: list[tuple[tuple[str, ...], Any]]) -> Any:
    """A copy of the file's values (a mapping) with each set applied in order, creating the sections it names;
    UsageError where a key crosses a setting that is not a section."""
    if not sets:
        return values
    result = copy.deepcopy(values) if isinstance(values, dict) else {}
    for names, value in sets:
        section = result
        for depth, name in enumerate(names[:-1]):
            inner = section.setdefault(name, {})
            if inner is None:
                inner = section[name] = {}
            if not isinstance(inner, dict):
                raise UsageError(f"--set {'.'.join(names)}: {'.'.join(names[:depth + 1])} is a setting "
                                 f"({inner!r}), not a section of settings; set it whole: --set "
                                 f"{'.'.join(names[:depth + 1])}=VALUE")
            section = inner
        section[names[-1]] = value
    return result


def described(source: str, pairs: list[str]) -> str:
    """How errors name a file read with --set pairs: 'smoke.yaml (with --set a=1 --set b=2)'."""
    return f"{source} (with {' '.join('--set ' + p for p in pairs)})" if pairs else source
