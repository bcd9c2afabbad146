"""The space's `sampler:`, Optuna's own samplers behind the sweep's searcher (tuning/search/searcher.py makes
them; this module checks a space's choice without importing Optuna, as the command line starts without it).

  tpe      the default: multivariate TPE with a constant liar (several trials run at once), random first trials
  random   uniform over the space
  gp       Gaussian-process Bayesian optimisation (Optuna's GPSampler; imports torch in the driver)
  cmaes    CMA-ES over the numeric settings, choices sampled at random (needs the `cmaes` package)
  grid     every combination of the entries' values once: each entry a choice list, an int range or a float
           range with step; `trials` unset runs the whole grid and each `initial` point off it. An initial point
           on the grid is that point's one run (tuning/search/searcher.py's SweepGridSampler)
Every sampler is seeded by the space's `seed`. The sampler is recorded in MLflow (the sweep's `sampler` param)
and in the study (its `sampler` user attribute).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from typing import Any

from tuning.search.search_section import Choice, FloatRange, IntRange, Spec
from tuning.yaml_io import ConfigError

SAMPLERS = ("tpe", "random", "gp", "cmaes", "grid")


def check_sampler(name: Any, search: dict[str, Spec], trials: int, source: str,
                  initial: tuple[dict[str, Any], ...] = ()) -> None:
    """Refuse an unknown sampler, cmaes without its package, and a grid that cannot be one or has fewer points
    (with the `initial` points off it) than `trials`; raises ConfigError."""
    if name not in SAMPLERS:
        raise ConfigError(f"{source}: sampler must be one of {', '.join(SAMPLERS)}, got {name!r}")
    if name == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise ConfigError(f"{source}: sampler cmaes needs the cmaes package, which is not installed; "
                          "pip install cmaes, or choose another sampler")
    if name == "grid" and trials > grid_trials(search, initial, source):
        off = len(off_grid(search, initial, source))
        plus = f" and {off} initial point{'s' if off != 1 else ''} off it" if off else ""
        raise ConfigError(f"{source}: trials {trials} is more than the grid's {grid_size(search, source)} "
                          f"combinations{plus}, which would run some twice; lower trials or leave it unset")


def grid_trials(search: dict[str, Spec], initial: tuple[dict[str, Any], ...], source: str) -> int:
    """The trials a grid runs with `trials` unset: each of its points once, and each initial point off it (one on
    it is that point's run)."""
    return grid_size(search, source) + len(off_grid(search, initial, source))


def off_grid(search: dict[str, Spec], initial: tuple[dict[str, Any], ...], source: str) -> list[dict[str, Any]]:
    """The initial points with a value that is none of its entry's grid values (a point that leaves an entry out
    takes the rest of a grid point: on it)."""
    values = grid_values(search, source)
    return [point for point in initial
            if not all(any(same_value(v, g) for g in values[key]) for key, v in point.items())]


def holds(values: dict[str, Any], point: dict[str, Any], partly: bool = False) -> bool:
    """Whether a trial's settings (`values`) are the grid `point`: every entry the same (`partly`: every entry
    the trial has)."""
    return all(same_value(values[key], v) if key in values else partly for key, v in point.items())


def same_value(a: Any, b: Any) -> bool:
    """Equal as grid values: floats within rounding (low + i * step against a value written 0.3), others exactly."""
    if isinstance(a, float) or isinstance(b, float):
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        return numbers and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b and type(a) is type(b)


def grid_size(search: dict[str, Spec], source: str) -> int:
    """How many combinations the grid of the search entries holds; raises ConfigError for a continuous entry."""
    return math.prod(len(values) for values in grid_values(search, source).values())


def grid_values(search: dict[str, Spec], source: str) -> dict[str, list[Any]]:
    """Each entry's values on the grid: its choices, its int range, or its float range at each step."""
    values = {}
    for key, spec in search.items():
        if isinstance(spec, Choice):
            values[key] = list(spec.choices)
        elif isinstance(spec, IntRange):
            values[key] = list(spec.values())
        elif isinstance(spec, FloatRange) and spec.step:
            values[key] = list(spec.values())
        else:
            raise ConfigError(f"{source}: sampler grid needs search.{key} to be a choice list or a range with "
                              "step, it is a continuous range; give it a step or choices")
    return values


def grid_points(search: dict[str, Spec]) -> list[dict[str, Any]]:
    """Every combination of the grid, in order (the grid sampler shuffles them by the space's seed)."""
    values = grid_values(search, "space")
    return [dict(zip(values, combination, strict=True)) for combination in itertools.product(*values.values())]
