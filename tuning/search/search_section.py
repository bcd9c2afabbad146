"""A space's `search:` section: each searched setting (tuning/search/searchable.py) and its range or choices.

  learning_rate:   {low: 1e-5, high: 1e-3, log: true}      a float range (step: a grid of that spacing)
  data.window:     {low: 32, high: 256, step: 32}          an int range (log: true for a log scale)
  model.d_model:   {choices: [32, 64, 128]}                choices, of any kind the setting takes

Each setting is searched under one name: learning_rate and train.lr both in one section are refused.

A value the recipe refuses in every combination with the other searched values (a d_model of 0, a
headdim that divides no inner width) is refused here, and the space when no combination at all is
valid; a sampled combination the model refuses (a headdim that does not divide this trial's inner
width) is a trial ended as `invalid` before it starts workers (tuning/sweep/trainable.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from model.settings import finite_number
from tuning.search.nearest_names import did_you_mean
from tuning.search.recipe import TrainingRecipe
from tuning.search.searchable import Setting, resolve
from tuning.yaml_io import ConfigError

ENUMERATED = 32  # a range with at most this many values is checked value by value
COMBINATIONS = 4096  # beyond this many, each value is checked with the others' first values only


@dataclass(frozen=True)
class FloatRange:
    low: float  # the range's lower end
    high: float  # the range's upper end
    log: bool = False  # sample on a log scale (low must then be > 0)
    step: float | None = None  # sample on a grid of this spacing from low (not with log)

    def values(self) -> tuple[float, ...]:
        """The grid's values, low, low + step, ... up to high (a range with step only)."""
        assert self.step, "a continuous range has no grid of values"
        count = int((self.high - self.low) / self.step + 1e-9) + 1
        return tuple(min(self.low + i * self.step, self.high) for i in range(count))  # high itself, not high + rounding


@dataclass(frozen=True)
class IntRange:
    low: int  # the range's lower end
    high: int  # the range's upper end (included)
    step: int = 1  # sample low, low + step, ... up to high
    log: bool = False  # sample on a log scale (low must then be >= 1; step must be 1)

    def values(self) -> range:
        return range(self.low, self.high + 1, self.step)


@dataclass(frozen=True)
class Choice:
    choices: tuple[Any, ...]  # the values to pick from


Spec = FloatRange | IntRange | Choice


def with_searched(run: TrainingRecipe, params: dict[str, Any]) -> TrainingRecipe:
    """`run` with each searched setting of `params` set (raises ConfigError for a combination it refuses)."""
    changes: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        setting = resolve(key)
        changes.setdefault(setting.section, {})[setting.field] = value
    for section, values in changes.items():
        run = run.replace(section, **values)
    return run


def parse_search(values: Any, run: TrainingRecipe, source: str, stored: bool = False) -> dict[str, Spec]:
    """The section's entries, each checked against its setting and the recipe; raises ConfigError. `stored`: a space
    a sweep keeps (tuning/search/space.py: parse_space), where one setting under two names, which earlier versions
    accepted, is read as it was run."""
    if not isinstance(values, dict) or not values:
        raise ConfigError(f"{source}: search must be a mapping of at least one setting to its range or choices, "
                          "e.g. {learning_rate: {low: 1e-5, high: 1e-3, log: true}}")
    parsed: dict[str, Spec] = {}
    entries: dict[str, str] = {}  # {train.lr: learning_rate}: each setting searched once, under one name
    for key, spec in values.items():
        try:
            setting = resolve(key)
        except ValueError as exc:
            raise ConfigError(f"{source}: search: {exc}") from None
        if setting.name in entries and not stored:
            raise ConfigError(f"{source}: search gives {setting.name} twice, as {entries[setting.name]} and {key} "
                              "(one setting, two Optuna dimensions); keep one")
        entries[setting.name] = key
        parsed[key] = _spec(setting, spec, source, f"search.{key}")
    _require_valid_combinations(parsed, run, source)
    return parsed


def representative_values(spec: Spec) -> tuple[Any, ...]:
    """The values a load-time check tries: every choice, every value of a short range, else its two ends."""
    if isinstance(spec, Choice):
        return spec.choices
    if isinstance(spec, IntRange) and len(spec.values()) <= ENUMERATED:
        return tuple(spec.values())
    if isinstance(spec, FloatRange) and spec.step and (spec.high - spec.low) / spec.step < ENUMERATED:
        return spec.values()
    return (spec.low, spec.high)


def _require_valid_combinations(search: dict[str, Spec], run: TrainingRecipe, source: str) -> None:
    """Refuse a choice or range end that no combination accepts, and the space when none is valid."""
    keys = list(search)
    candidates = [representative_values(search[key]) for key in keys]
    if math.prod(len(c) for c in candidates) <= COMBINATIONS:
        combinations = itertools.product(*candidates)
    else:  # each value with the others' first values
        firsts = [c[0] for c in candidates]
        combinations = (tuple(v if j == i else firsts[j] for j in range(len(keys)))
                        for i, c in enumerate(candidates) for v in c)
    accepted: list[set[Any]] = [set() for _ in keys]
    first_error = None
    for combination in combinations:
        try:
            with_searched(run, dict(zip(keys, combination, strict=True)))
        except ConfigError as exc:
            first_error = first_error or (combination, exc)
            continue
        for seen, value in zip(accepted, combination, strict=True):
            seen.add(value)
    if first_error and not any(accepted):
        combination, exc = first_error
        raise ConfigError(f"{source}: search: no combination of the searched values is valid, e.g. "
                          f"{_named(keys, combination)}: {exc}; change the ranges or the fixed settings")
    for key, seen in zip(keys, accepted, strict=True):
        spec = search[key]
        ends = spec.choices if isinstance(spec, Choice) else (spec.low, spec.high)
        refused = [v for v in ends if v not in seen]
        if refused:
            raise ConfigError(f"{source}: search.{key}: {refused[0]!r} is refused in every combination with the "
                              f"other searched values ({_refusal(run, key, refused[0])}); remove or change it")


def _refusal(run: TrainingRecipe, key: str, value: Any) -> str:
    try:
        with_searched(run, {key: value})
    except ConfigError as exc:
        return str(exc)
    return "with each of the others' values"


def _named(keys: list[str], combination: tuple[Any, ...]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in zip(keys, combination, strict=True))


def _spec(setting: Setting, spec: Any, source: str, where: str) -> Spec:
    if not isinstance(spec, dict):
        raise ConfigError(f"{source}: {where} must be a mapping: {{low, high}} or {{choices: [...]}}")
    if "choices" in spec:
        _only(spec, ("choices",), source, where)
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{source}: {where}.choices must be a non-empty list, got {choices!r}")
        if not all(_of_kind(c, setting.kind) for c in choices):
            raise ConfigError(f"{source}: {where}.choices must be {setting.kind.__name__} values "
                              f"({setting.name}), got {choices!r}")
        if len(set(choices)) != len(choices):
            raise ConfigError(f"{source}: {where}.choices repeats a value, got {choices!r}; list each once")
        return Choice(tuple(choices))
    if setting.name == "train.batch_size":  # the memory probe measures each batch size a trial may use
        raise ConfigError(f"{source}: {where} must be a choice list, e.g. {{choices: [128, 256, 512]}}")
    if setting.kind not in (int, float):
        raise ConfigError(f"{source}: {where}: {setting.name} takes {setting.kind.__name__} values, so it needs a "
                          f"choice list, e.g. {{choices: [...]}}")
    _only(spec, ("low", "high", "log", "step"), source, where)
    low, high, log, step = spec.get("low"), spec.get("high"), spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise ConfigError(f"{source}: {where}.log must be true or false, got {log!r}")
    if not all(_of_kind(v, setting.kind) for v in (low, high)):
        raise ConfigError(f"{source}: {where} needs {setting.kind.__name__} low and high ({setting.name}), "
                          f"got low={low!r}, high={high!r}")
    if low >= high:
        raise ConfigError(f"{source}: {where}: low {low} must be below high {high}; swap or widen them")
    if log and low <= 0:
        raise ConfigError(f"{source}: {where}: a log scale needs low > 0, got {low}; use a positive low")
    if step is not None and (not _of_kind(step, setting.kind) or step <= 0):
        raise ConfigError(f"{source}: {where}.step must be a positive {setting.kind.__name__}, got {step!r}")
    if step is not None and log and (setting.kind is float or step != 1):
        raise ConfigError(f"{source}: {where}: step and log cannot be combined (Optuna's rule); drop one")
    if setting.kind is int:
        return IntRange(low, high, step or 1, log)
    return FloatRange(float(low), float(high), log, float(step) if step is not None else None)


def _of_kind(value: Any, kind: type) -> bool:
    if kind is float:
        return finite_number(value)
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _only(spec: dict[str, Any], allowed: tuple[str, ...], source: str, where: str) -> None:
    unknown = sorted(str(key) for key in set(spec) - set(allowed))
    if unknown:
        takes = f"{where} takes {' and '.join(allowed)}" if len(allowed) < 3 else \
            f"a range takes {', '.join(allowed[:-1])} and {allowed[-1]}; choices take choices alone"
        near = did_you_mean(f"{where}.{unknown[0]}", [f"{where}.{key}" for key in allowed], listed_by=takes)
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in {where}; {near}")
