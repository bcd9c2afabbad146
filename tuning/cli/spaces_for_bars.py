"""Which shipped search spaces a number of bars is enough for: `data check` names them, and the too-few-bars refusal
of `data check` and `sweep` too."""

from __future__ import annotations

from model.bars import DataError
from model.bars_enough import TooFewBars, bars_needed, enough_bars
from model.data import DataConfig
from tuning.cli.data_common import data_settings
from tuning.search.shipped_spaces import shipped_spaces


def shipped_settings() -> dict[str, DataConfig]:
    """{name: its data settings with its walk-forward folds} of every shipped space (search_spaces/*.yaml)."""
    return {name: data_settings(None, path)[0] for name, path in shipped_spaces().items()}


def spaces_for(n: int) -> str:
    """The shipped spaces n bars are enough for, and how many bars each of the others needs, e.g.
    "the shipped spaces smoke, sp500 (default needs 1,705 bars)"."""
    settings = shipped_settings()
    fit = [name for name, config in settings.items() if enough_bars(n, config)]
    others = ", ".join(f"{name} needs {bars_needed(config):,} bars" for name, config in settings.items()
                       if name not in fit)
    if not fit:
        return f"none of the shipped spaces ({others})"
    return f"the shipped space{'s' if len(fit) > 1 else ''} {', '.join(fit)}" + (f" ({others})" if others else "")


def with_spaces_that_fit(error: TooFewBars) -> DataError:
    """The refusal of too few bars, with the shipped spaces those bars are enough for (spaces_for) at its end."""
    return DataError(f"{error}; these {error.n:,} bars are enough for {spaces_for(error.n)}")
