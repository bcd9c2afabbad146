"""The cheap forecasts a model must beat, scored on the model's own samples in scaled target units.

  mean         the training targets' mean (0 in scaled units)
  persistence  the target's own quantity observed at the sample's last bar (model/features.py)
  har          least squares, fitted on the training samples alone, of the target on an intercept
               and the target's own quantity over the last L bars, for L in 1, h, 4h and 10h
               (h: the horizon; duplicates dropped when h is 1):
                 volatility  log Parkinson volatility of the last L bars: HAR-RV (Corsi, 2009)
                 return      log return over the last L bars
                 close       mean close of the last L bars
               It contains both other baselines (the intercept alone is the mean; the lookback h
               for volatility and return, 1 for close, is persistence), so on the training samples
               it is never worse than either: the yardstick, and the gate's default baseline.
               Near the series' start a lookback reaches back to bar 0 and no further.
"""

from __future__ import annotations

import numpy as np

from model.features import TARGETS, trailing_log_volatility

BASELINES = ("har", "persistence", "mean")


def har_lookbacks(horizon: int) -> tuple[int, ...]:
    """The HAR regression's lookbacks in bars, shortest first."""
    return tuple(sorted({1, horizon, 4 * horizon, 10 * horizon}))


def past_quantities(close: np.ndarray, log_range: np.ndarray, target: str, lookbacks: tuple[int, ...]) -> np.ndarray:
    """(n_bars, n_lookbacks) float32: row i holds the target's quantity over bars i-L+1..i for each L.

    close: (n_bars,) closing prices; log_range: (n_bars,) log(high/low). A window that would start
    before bar 0 starts at bar 0.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    n = len(close)
    out = np.empty((n, len(lookbacks)), dtype=np.float32)
    bars = np.arange(n)
    if target == "return":
        log_close = np.log(close)
        for j, length in enumerate(lookbacks):
            out[:, j] = log_close - log_close[np.maximum(bars - length, 0)]
        return out
    if target == "volatility":
        return trailing_log_volatility(log_range, lookbacks)
    sums = np.concatenate([[0.0], np.cumsum(close.astype(np.float64))])  # sums[j]: bars 0..j-1
    for j, length in enumerate(lookbacks):
        start = np.maximum(bars + 1 - length, 0)
        out[:, j] = (sums[bars + 1] - sums[start]) / (bars + 1 - start)
    return out


def fit_har(past: np.ndarray, target: np.ndarray, train_index: np.ndarray) -> np.ndarray:
    """Least-squares coefficients (intercept, then one per lookback) -> (n_lookbacks + 1,) float64.

    past: (n_bars, n_lookbacks) from past_quantities; target: (n_bars,) scaled targets;
    train_index: (n_train,) the training samples' last input bars, the only rows it reads.
    """
    design = _design(past, train_index)  # (n_train, n_lookbacks + 1)
    coefficients, *_ = np.linalg.lstsq(design, target[train_index].astype(np.float64), rcond=None)
    return coefficients


def har_forecast(past: np.ndarray, coefficients: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n,) float64 HAR forecasts, scaled, of the samples ending at bars `index` (n,)."""
    return _design(past, index) @ coefficients


def scored_baselines(target: np.ndarray, persistence: np.ndarray, har: np.ndarray,
                     index: np.ndarray) -> dict[str, float]:
    """Mean squared error of each baseline over the samples ending at bars `index` (n,), in scaled units.

    target, persistence: (n_bars,) scaled; har: (n,) forecasts for exactly those samples.
    """
    actual = target[index].astype(np.float64)
    return {
        "har": float(np.mean((har - actual) ** 2)),
        "persistence": float(np.mean((persistence[index] - actual) ** 2)),
        "mean": float(np.mean(actual**2)),  # the training mean is 0 in scaled units
    }


def _design(past: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n, n_lookbacks + 1) float64: a column of ones, then the rows `index` (n,) of past."""
    return np.column_stack([np.ones(len(index)), past[index].astype(np.float64)])
