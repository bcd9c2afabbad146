"""Shared checks of the frozen config dataclasses (ModelConfig, DataConfig, TrainConfig)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any


def finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Interval:
    """A rule for a number: low and high, each end open or closed. str() reads as "in [0, 1)"."""

    low: float
    high: float
    low_closed: bool = True
    high_closed: bool = False

    def __contains__(self, value: Any) -> bool:  # NaN and non-numbers are never inside
        if not finite_number(value):
            return False
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def __str__(self) -> str:
        return f"in {'[' if self.low_closed else '('}{self.low:g}, {self.high:g}{']' if self.high_closed else ')'}"


def known_settings(cls: type, values: dict[str, Any], what: str) -> dict[str, Any]:
    """`values` unchanged when every key is a field of `cls`, else a ValueError naming the key."""
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} setting {unknown[0]!r}; allowed: {', '.join(allowed)}")
    return values


def require_positive_ints(config: Any, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Each named field is an int >= 1 (None allowed for those in `optional`)."""
    for name in names:
        value = getattr(config, name)
        if value is None and name in optional:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def plain_values(config: Any) -> dict[str, Any]:
    """Fields as YAML/JSON-ready values: tuples become lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}
