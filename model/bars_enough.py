"""How many bars a DataConfig needs, and the smallest change of its settings that makes fewer bars enough.

sample_ends places each segment's samples in n bars (model/data.py's split); enough_bars says whether each segment
has enough of them, bars_needed the fewest bars that do, and require_enough_bars refuses too few in one line that
names the bars needed and each setting's smallest change (data.window, the fractions, confirm.folds) that fits.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from model.bars import DataError

if TYPE_CHECKING:
    from model.data import DataConfig


class TooFewBars(DataError):
    """require_enough_bars's refusal of n bars that more bars (or a change it names) would make enough; `n` lets a
    command add what else the n bars are enough for (tuning/cli/spaces_for_bars.py)."""

    def __init__(self, message: str, n: int) -> None:
        super().__init__(message)
        self.n = n

    def __reduce__(self) -> tuple:  # pickled (Ray) with its bar count
        return TooFewBars, (str(self), self.n)


def test_segment_start(n: int, config: DataConfig) -> int:
    """The first bar of the test segment of n bars (n when test_fraction is 0)."""
    return int(round(n * (1 - config.test_fraction)))


def sample_ends(n: int, config: DataConfig) -> tuple[int, int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(split bar, test bar, (train, val, test)): the last input bar of every sample of each segment, for n bars;
    each of the three is (n_samples,) int64, ascending.

    Training samples end by split-1-h (their targets too); validation windows start at split and
    their targets end before the validation segment's end (fold 1: the test bar); test windows start
    at the test bar. Fold f's validation segment is fold 1's, moved f-1 lengths earlier. Inputs start
    at bar 1 (bar 0 has no previous bar) and persistence needs h bars before. The window here is the sample
    window (align_window where set): every window up to it gets the same samples.
    """
    w, h = config.sample_window, config.horizon
    test_bar = test_segment_start(n, config)
    fold_one = int(round(n * (1 - config.test_fraction - config.val_fraction)))
    length = test_bar - fold_one  # bars in a validation segment
    split = fold_one - (config.fold - 1) * length
    first = max(w, h)
    train_index = np.arange(first, split - h, dtype=np.int64)
    val_index = np.arange(max(split + w - 1, first), split + length - h, dtype=np.int64)
    test_index = np.arange(max(test_bar + w - 1, first), n - h, dtype=np.int64) if test_bar < n else \
        np.empty(0, dtype=np.int64)
    return split, test_bar, (train_index, val_index, test_index)


def _enough(config: DataConfig, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> bool:
    """One training sample, min_val_samples validation samples and, with a test segment, as many test samples."""
    return len(train) >= 1 and len(val) >= config.min_val_samples and (
        config.test_fraction == 0 or len(test) >= config.min_val_samples)


def require_enough_bars(path: str | Path, n: int, config: DataConfig) -> None:
    """Raise TooFewBars when n bars leave a segment of `config` too small: one line naming the bar count needed and
    the smallest change of each setting that makes n bars enough (each checked here: enough_bars of the changed
    settings)."""
    if enough_bars(n, config):
        return
    vf, tf = config.val_fraction, config.test_fraction
    train_fraction = 1 - tf - config.fold * vf  # of the fold's training bars
    if train_fraction <= 1e-9:  # no bar count is enough: the fold starts at or before bar 0
        most = math.ceil((1 - tf) / vf - 1e-9) - 1
        raise DataError(f"{path}: walk-forward fold {config.fold} (confirm.folds) would start before the first bar: "
                        f"{config.fold} validation segments of data.val_fraction {vf} and data.test_fraction {tf} "
                        f"leave no bar to train on; use confirm.folds at most {most} or a smaller data.val_fraction")
    w, h = config.sample_window, config.horizon
    segments = "validation and test segments" if tf else "validation segment"
    fold = f" and walk-forward fold {config.fold} (confirm.folds)" if config.fold > 1 else ""
    window = f"window {w}" if config.align_window is None else \
        f"window {config.window} aligned to {w} (the longest data.window the search tries)"
    fixes = ["more bars", *_changes_that_fit(n, config)]
    raise TooFewBars(f"{path}: {n:,} bars are too few, {window} + horizon {h} + at least {config.min_val_samples} "
                     f"samples in the {segments} need {bars_needed(config):,} bars at data.val_fraction {vf} and "
                     f"data.test_fraction {tf}{fold}; use {', or '.join(fixes)}", n)


def enough_bars(n: int, config: DataConfig) -> bool:
    """Whether n bars give every segment of `config` enough samples (_enough)."""
    return _enough(config, *sample_ends(n, config)[2])


def bars_needed(config: DataConfig) -> int:
    """Smallest bar count that gives every segment enough samples (enough_bars), by bisection."""
    low, high = 1, config.sample_window + config.horizon + config.min_val_samples
    while not enough_bars(high, config):
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if not enough_bars(middle, config) else (low, middle)
    return high


def _changes_that_fit(n: int, config: DataConfig) -> list[str]:
    """The smallest change of data.window, of the fractions and of confirm.folds, each alone, with which n bars are
    enough, as the settings' names and values (e.g. "data.window at most 94"); those that cannot are left out."""
    changes = []
    if (window := _longest_window_that_fits(n, config)) is not None:
        searched = " (the run's and every value the search tries)" if config.align_window is not None else ""
        changes.append(f"data.window at most {window}{searched}")
    if (fractions := _fractions_that_fit(n, config)) is not None:
        names = ("val_fraction", "test_fraction")
        olds = (config.val_fraction, config.test_fraction)
        changes.append(" with ".join(f"data.{name} {value}" for name, value, old in zip(names, fractions, olds,
                                                                                       strict=True) if value != old))
    if config.fold > 1 and (folds := _most_folds_that_fit(n, config)) is not None:
        changes.append(f"confirm.folds at most {folds}")
    return changes


def _longest_window_that_fits(n: int, config: DataConfig) -> int | None:
    """The longest sample window (with align_window, the longest window of any trial) shorter than config's with
    which n bars are enough; None when there is none, or a lookback of the settings is longer than it."""
    def with_window(window: int) -> DataConfig:
        aligned = None if config.align_window is None else window
        return dataclasses.replace(config, window=min(config.window, window), align_window=aligned)

    def fits(window: int) -> bool:  # the lookbacks aside, a shorter window only leaves more samples
        return enough_bars(n, dataclasses.replace(config, window=window, align_window=None,
                                                  vol_lookbacks=None, leverage_lookbacks=None))

    if not fits(1):
        return None
    low, high = 1, config.sample_window - 1  # fits(low) holds
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    try:
        return low if enough_bars(n, with_window(low)) else None
    except ValueError:  # a lookback longer than the window: that change alone does not fit
        return None


def _fractions_that_fit(n: int, config: DataConfig) -> tuple[float, float] | None:
    """(val_fraction, test_fraction), each at least config's and on a grid of 0.01 above it, with the smallest raise
    in all with which n bars are enough (no test segment stays none); None when no such pair is."""
    vf, tf = config.val_fraction, config.test_fraction
    vals = [vf, *(k / 100 for k in range(1, 100) if k / 100 > vf)]
    tests = [tf] if tf == 0 else [tf, *(k / 100 for k in range(1, 99) if k / 100 > tf)]
    pairs = sorted(((v, t) for v in vals for t in tests if v + t <= 0.99 and (v, t) != (vf, tf)),
                   key=lambda pair: (round(pair[0] + pair[1] - vf - tf, 9), pair[1]))
    for v, t in pairs:
        if enough_bars(n, dataclasses.replace(config, val_fraction=v, test_fraction=t)):
            return v, t
    return None


def _most_folds_that_fit(n: int, config: DataConfig) -> int | None:
    """The most walk-forward folds, fewer than config's, with which n bars are enough; None when not even one."""
    for fold in range(config.fold - 1, 0, -1):
        if enough_bars(n, dataclasses.replace(config, fold=fold)):
            return fold
    return None
