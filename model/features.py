"""Model inputs and targets computed from validated bars.

Features, one row per bar t (row 0 has no previous bar and is never used as input):
  0 log return       log(close_t / close_{t-1})
  1 range            log(high_t / low_t)
  2 body             log(close_t / open_t)
  3 upper wick       log(high_t / max(open_t, close_t))
  4 lower wick       log(min(open_t, close_t) / low_t)
  5 volume change    log1p(volume_t) - log1p(volume_{t-1})
  6, 7 time of day   sin and cos of 2 pi (seconds since midnight UTC) / 86400

Targets of the sample whose last input bar is i, over the next h bars (TARGETS):
  return      log(close_{i+h} / close_i)
  volatility  log of the Parkinson range volatility sqrt(mean(log(H/L)^2) / (4 ln 2)) of bars i+1..i+h
  close       close_{i+1}, the original system's target (scaled like every target)
Persistence, the naive forecast, is the same quantity observed at i: the return over
bars i-h..i, the volatility of bars i-h+1..i, and close_i.
"""

from __future__ import annotations

import math

import numpy as np

from model.bars import Bars

FEATURE_NAMES = ("log_return", "range", "body", "upper_wick", "lower_wick", "volume_change", "tod_sin", "tod_cos")
TARGETS = ("return", "volatility", "close")
_VOL_FLOOR = 1e-6  # an all-flat stretch of bars has zero range: keep the log finite
_NS_PER_DAY = 86_400 * 10**9


def bar_features(bars: Bars) -> np.ndarray:
    """(n_bars, 8) float32 features; row 0 uses itself as the previous bar."""
    n = len(bars)
    out = np.empty((n, len(FEATURE_NAMES)), dtype=np.float32)
    log_close = np.log(bars.close)
    out[0, 0] = 0.0
    out[1:, 0] = np.diff(log_close)
    log_high, log_low, log_open = np.log(bars.high), np.log(bars.low), np.log(bars.open)
    out[:, 1] = log_high - log_low
    out[:, 2] = log_close - log_open
    out[:, 3] = log_high - np.maximum(log_open, log_close)
    out[:, 4] = np.minimum(log_open, log_close) - log_low
    log_volume = np.log1p(bars.volume)
    out[0, 5] = 0.0
    out[1:, 5] = np.diff(log_volume)
    angle = (bars.timestamp % _NS_PER_DAY) * (2 * math.pi / _NS_PER_DAY)
    out[:, 6] = np.sin(angle)
    out[:, 7] = np.cos(angle)
    return out


def target_and_persistence(bars: Bars, target: str, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(target, persistence), each (n_bars,) float64, indexed by the sample's last input bar.

    NaN where the bars to compute it from do not exist (the last `horizon` bars for the
    target, the first `horizon` for persistence).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    n, h = len(bars), horizon
    future = np.full(n, np.nan)
    past = np.full(n, np.nan)
    if target == "return":
        log_close = np.log(bars.close)
        future[: n - h] = log_close[h:] - log_close[: n - h]
        past[h:] = log_close[h:] - log_close[: n - h]
    elif target == "close":
        future[: n - 1] = bars.close[1:]
        past[:] = bars.close
    else:
        squared = np.log(bars.high / bars.low) ** 2
        sums = np.concatenate([[0.0], np.cumsum(squared)])
        window_mean = (sums[h:] - sums[:-h]) / h  # [j] = mean of bars j..j+h-1
        log_vol = np.log(np.maximum(np.sqrt(window_mean / (4 * math.log(2))), _VOL_FLOOR))
        future[: n - h] = log_vol[1:]  # bars i+1..i+h
        past[h - 1 :] = log_vol  # bars i-h+1..i
    return future, past
