"""--set KEY=VALUE: a setting of a search space or a run configuration, by its dotted name, over the file's.

The names are every setting's one dotted name (scheduler.max_epochs, search.learning_rate.high,
search.model.d_model.choices, model.d_model, train.lr, data.window), the same in a space and a run configuration.
A run setting may also be given by its short name (learning_rate is train.lr) or, in a space, by its older spelling
(run.model.d_model is model.d_model); it is set where the file gives it, in the file's spelling, so that it is never
given twice. Two names of one setting in one command's pairs are refused. A value is read as a number where it is
one (3e-3 included, which YAML would read as text), else as YAML (true, null, [32, 64], {low: 1, high: 4}). The
result is validated exactly as the file is, by whoever reads it.

A value given by --set is never repeated in an error (it may be a secret: a webhook URL, a token): the errors here
name the key alone, and `hide_set_values` takes out of any other error line each value where it would stand.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from tuning.errors import UsageError
from tuning.search.searchable import ALIASES, OLDER_RUN, RUN_SECTIONS, resolve, setting_name

SPEC_FIELDS = ("low", "high", "log", "step", "choices")  # the keys of a search entry (search_section.py)
_KEY = re.compile(r"[\w.\- ]+")  # what a key may be to be shown: names, dots (a URL or a token is no key)
SHORTEST_HIDDEN = 4  # a value shorter than this (a number, true) is taken out only where it stands quoted


def parse_sets(pairs: list[str]) -> list[tuple[tuple[str, ...], Any]]:
    """["scheduler.max_epochs=20"] -> [(("scheduler", "max_epochs"), 20)], a short name as its setting
    (["learning_rate=1e-3"] -> [(("train", "lr"), 0.001)]); UsageError for a pair that is not KEY=VALUE with a dotted
    KEY of names, or for two names of one setting (naming the keys, never a value)."""
    sets = []
    spelled: dict[str, str] = {}  # {train.lr: learning_rate}: the name each setting was given by
    for number, pair in enumerate(pairs, 1):
        key, sep, text = pair.partition("=")
        names = tuple(name.strip() for name in key.split("."))
        if not sep:  # all of it may be the value, the key forgotten: not shown
            raise UsageError(f"--set number {number} has no '=', so it is not KEY=VALUE (its text is not repeated: "
                             "it may be a value); give a dotted key and its value, e.g. --set scheduler.max_epochs=20")
        if not all(names):
            raise UsageError(f"--set {shown_key(key)}=... is not KEY=VALUE with a dotted key of names, e.g. --set "
                             "scheduler.max_epochs=20")
        key = ".".join(names)
        setting = setting_name(key)
        if spelled.setdefault(setting, key) != key:
            raise UsageError(f"--set {shown_key(spelled[setting])} and --set {shown_key(key)} both set {setting}; "
                             "give one of them")
        names = tuple(ALIASES[key].split(".")) if key in ALIASES else names
        sets.append((_search_entry(names), value_of(text.strip())))
    return sets


def shown_key(key: str) -> str:
    """A --set key as an error may show it: itself where it is dotted names, else KEY (a key that is no name may be
    a value given without its key)."""
    return key.strip() if _KEY.fullmatch(key.strip()) else "KEY"


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
        names = placed(result, names)
        section = result
        for depth, name in enumerate(names[:-1]):
            inner = section.setdefault(name, {})
            if inner is None:
                inner = section[name] = {}
            if not isinstance(inner, dict):  # its value is not shown: an earlier --set may have given it
                raise UsageError(f"--set {shown_key('.'.join(names))}: {shown_key('.'.join(names[:depth + 1]))} is a "
                                 f"setting, not a section of settings; set it whole: --set "
                                 f"{shown_key('.'.join(names[:depth + 1]))}=VALUE")
            section = inner
        section[names[-1]] = value
    return result


def placed(values: dict[str, Any], names: tuple[str, ...]) -> tuple[str, ...]:
    """Where a run setting is set in `values`: in the spelling they give it (model.d_model, or run.model.d_model in
    a space that writes run:), else where they give its section, else at the top level; a search entry
    (search.learning_rate.high) in the entry that searches its setting under either name (search.train.lr.high);
    other names unchanged."""
    if len(names) > 1 and names[0] == "search":
        return ("search", _search_key(values.get("search"), names[1]), *names[2:])
    if len(names) > 2 and names[0] == OLDER_RUN and names[1] in RUN_SECTIONS:
        names = names[1:]
    if len(names) < 2 or names[0] not in RUN_SECTIONS:
        return names
    run = values.get(OLDER_RUN)
    section = run.get(names[0]) if isinstance(run, dict) else None
    if not isinstance(section, dict):
        return names
    given_older = names[1] in section
    given_newer = isinstance(values.get(names[0]), dict) and names[1] in values[names[0]]
    return (OLDER_RUN, *names) if given_older or (not given_newer and names[0] not in values) else names


def _search_key(search: Any, key: str) -> str:
    """The key of the search entry in `search` that searches the setting `key` names (itself where none does, or
    where `key` names no searchable setting: the space then says what is wrong)."""
    if not isinstance(search, dict) or key in search:
        return key
    try:
        name = resolve(key).name
    except ValueError:
        return key
    for given in search:
        try:
            if resolve(str(given)).name == name:
                return given
        except ValueError:
            continue
    return key


def described(source: str, pairs: list[str]) -> str:
    """How errors name a file read with --set pairs, by their keys alone: 'smoke.yaml (with --set a=... --set
    b=...)'."""
    keys = (shown_key(pair.partition("=")[0]) for pair in pairs)
    return f"{source} (with {' '.join(f'--set {key}=...' for key in keys)})" if pairs else source


def hide_set_values(message: str, pairs: list[str]) -> str:
    """`message` (an error line) with each --set value taken out where it stands, as written or as read (its text,
    quoted or not, and each text inside a list or mapping): '<--set KEY>' in its place. A value shorter than
    SHORTEST_HIDDEN characters (a number, true) is taken out only where it stands quoted: bare, it would take
    out the words and numbers it happens to equal."""
    hidden: dict[str, str] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:  # refused by parse_sets before anything else is read, in words that never repeat it
            continue
        label = f"<--set {shown_key(key)}>"
        texts = {text.strip(), text, *_texts_of(value_of(text.strip()))}
        for value in filter(str.strip, texts):  # an empty value hides nothing
            for quoted in (repr(value), f'"{value}"', f"'{value}'"):
                hidden.setdefault(quoted, label)
            if len(value.strip()) >= SHORTEST_HIDDEN:
                hidden.setdefault(value, label)
    for value in sorted(hidden, key=len, reverse=True):  # the longest first: a value inside another's quotes
        edges = (r"(?<!\w)" if value[0].isalnum() or value[0] == "_" else "",
                 r"(?!\w)" if value[-1].isalnum() or value[-1] == "_" else "")
        message = re.sub(edges[0] + re.escape(value) + edges[1], lambda _, label=hidden[value]: label, message)
    return message


def _texts_of(value: Any) -> set[str]:
    """Every text `value` holds: itself as text, and each key and item of a list or mapping, as text."""
    if isinstance(value, dict):
        return {str(value), *(t for k, v in value.items() for t in (*_texts_of(k), *_texts_of(v)))}
    if isinstance(value, list | tuple):
        return {str(value), *(t for item in value for t in _texts_of(item))}
    return {str(value)}
