"""Model inputs and targets computed from validated bars.

Features, one row per bar t (row 0 has no previous bar and is never used as input), in this order:
  log_return         log(close_t / close_{t-1})
  range              log(high_t / low_t)
  body               log(close_t / open_t)
  upper_wick         log(high_t / max(open_t, close_t))
  lower_wick         log(min(open_t, close_t) / low_t)
  volume_change      log1p(volume_t) - log1p(volume_{t-1}); left out for bars without volume (VOLUME_FEATURES)
  tod_sin, tod_cos   sin and cos of 2 pi (seconds since midnight) / 86400 on the bars' clock (Bars.timezone:
                      the market's, so a session's hours do not move at daylight-saving changes)
  vol_L              for each lookback L of DataConfig.vol_lookbacks: the log Parkinson volatility
                      sqrt(mean(log(H/L)^2) / (4 ln 2)) of bars t-L+1..t (from bar 0 near the start):
                      HAR's inputs, so the model need not learn multi-scale volatility from single bars
  fall_L             for each lookback L of DataConfig.leverage_lookbacks: the mean of min(log return, 0)
                      over bars t-L+1..t (from bar 0 near the start): falls carry more of the coming
                      volatility than rises (the leverage effect, HAR's LHAR extension; Corsi and Reno, 2012)
  har (last)         with DataConfig.residual_to "har": the HAR forecast of the sample ending at t, in
                      scaled target units (model/baselines.py; filled by model/data.py once HAR is fitted)
Every feature of bar t reads bars 0..t only: changing bar t changes no feature before t. Columns are found by
name (feature_names), never by a fixed position: a feature left out moves the ones after it.

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

from model.bar_times import local_clock_ns
from model.bars import Bars

BAR_FEATURES = ("log_return", "range", "body", "upper_wick", "lower_wick", "volume_change", "tod_sin", "tod_cos")
VOLUME_FEATURES = ("volume_change",)  # the bar features that read volume: left out for bars without it
TARGETS = ("return", "volatility", "close")
VOL_FLOOR = 1e-6  # an all-flat stretch of bars has zero range: keep the log finite
_NS_PER_DAY = 86_400 * 10**9


def feature_names(vol_lookbacks: tuple[int, ...], har: bool, leverage_lookbacks: tuple[int, ...] = (), *,
                  volume: bool) -> list[str]:
    """The input columns in order: the bar features (less VOLUME_FEATURES without volume), vol_{L} per volatility
    lookback, fall_{L} per leverage lookback, then har when it is an input."""
    bar = [name for name in BAR_FEATURES if volume or name not in VOLUME_FEATURES]
    return [*bar, *(f"vol_{length}" for length in vol_lookbacks),
            *(f"fall_{length}" for length in leverage_lookbacks), *(["har"] if har else [])]


def bar_features(bars: Bars, vol_lookbacks: tuple[int, ...] = (), har: bool = False,
                 leverage_lookbacks: tuple[int, ...] = ()) -> np.ndarray:
    """(n_bars, n_features) float32 features, in feature_names' order (volume: bars.has_volume); row 0 uses itself
    as the previous bar. Bars without volume give no volume_change column: n_features is one fewer.

    The har column, when asked for, is left 0: HAR is fitted on the training segment's scaled
    targets (model/data.py), which this function does not know. Written column by column into the
    output with at most four float64 temporaries alive: on 10 million bars the pipeline's peak
    memory stays within 3x the raw columns.
    """
    names = feature_names(vol_lookbacks, har, leverage_lookbacks, volume=bars.has_volume)
    column = {name: j for j, name in enumerate(names)}
    out = np.zeros((len(bars), len(names)), dtype=np.float32)  # row 0 of the differences stays 0

    def into(name: str, rows: slice = slice(None)) -> dict:
        return {"out": out[rows, column[name]], "casting": "same_kind"}

    log_close, log_open = np.log(bars.close), np.log(bars.open)
    np.subtract(log_close[1:], log_close[:-1], **into("log_return", slice(1, None)))
    np.subtract(log_close, log_open, **into("body"))
    body_edge = np.maximum(log_open, log_close)
    log_high = np.log(bars.high)
    np.subtract(log_high, body_edge, **into("upper_wick"))
    np.minimum(log_open, log_close, out=body_edge)
    del log_open, log_close
    log_low = np.log(bars.low)
    np.subtract(body_edge, log_low, **into("lower_wick"))
    np.subtract(log_high, log_low, **into("range"))
    del log_high, log_low, body_edge
    if bars.has_volume:
        log_volume = np.log1p(bars.volume)
        np.subtract(log_volume[1:], log_volume[:-1], **into("volume_change", slice(1, None)))
        del log_volume
    angle = (local_clock_ns(bars.timestamp, bars.timezone) % _NS_PER_DAY).astype(np.float64)
    angle *= 2 * math.pi / _NS_PER_DAY
    np.sin(angle, **into("tod_sin"))
    np.cos(angle, **into("tod_cos"))
    del angle
    if vol_lookbacks:
        first = column[f"vol_{vol_lookbacks[0]}"]
        out[:, first:first + len(vol_lookbacks)] = trailing_log_volatility(out[:, column["range"]], vol_lookbacks)
    if leverage_lookbacks:
        first = column[f"fall_{leverage_lookbacks[0]}"]
        out[:, first:first + len(leverage_lookbacks)] = trailing_mean_fall(out[:, column["log_return"]],
                                                                          leverage_lookbacks)
    return out


def trailing_log_volatility(log_range: np.ndarray, lookbacks: tuple[int, ...]) -> np.ndarray:
    """(n_bars, n_lookbacks) float32: row t, column j is the log Parkinson volatility of bars t-L_j+1..t.

    log_range: (n_bars,) log(high/low). A window that would start before bar 0 starts at bar 0.
    Two float64 temporaries of n_bars alive at a time: the running sums and one column.
    """
    out = np.empty((len(log_range), len(lookbacks)), dtype=np.float32)
    sums = _running_sums(np.square(log_range, dtype=np.float64))
    for j, length in enumerate(lookbacks):
        variance = _trailing_mean(sums, length)
        variance /= 4 * math.log(2)  # Parkinson: mean(log(H/L)^2) / (4 ln 2) is a variance
        np.maximum(variance, 0.0, out=variance)
        np.sqrt(variance, out=variance)
        np.maximum(variance, VOL_FLOOR, out=variance)
        np.log(variance, out=out[:, j], casting="same_kind")
        del variance
    return out


def trailing_mean_fall(log_return: np.ndarray, lookbacks: tuple[int, ...]) -> np.ndarray:
    """(n_bars, n_lookbacks) float32: row t, column j is the mean of min(log return, 0) over bars t-L_j+1..t.

    log_return: (n_bars,) the log_return column of bar_features (0 at bar 0). A window that would start before bar 0
    starts at bar 0. Two float64 temporaries of n_bars alive at a time: the running sums and one column.
    """
    out = np.empty((len(log_return), len(lookbacks)), dtype=np.float32)
    sums = _running_sums(np.minimum(log_return, 0.0, dtype=np.float64))
    for j, length in enumerate(lookbacks):
        out[:, j] = _trailing_mean(sums, length)
    return out


def _running_sums(values: np.ndarray) -> np.ndarray:
    """(n + 1,) float64: [j] is the sum of values[0..j-1]; values: (n,) float64."""
    sums = np.empty(len(values) + 1)
    sums[0] = 0.0
    np.cumsum(values, out=sums[1:])
    return sums


def _trailing_mean(sums: np.ndarray, length: int) -> np.ndarray:
    """(n,) float64: [t] the mean of values t-length+1..t, from value 0 when t < length - 1.

    sums: (n + 1,) from _running_sums.
    """
    n = len(sums) - 1
    mean = np.empty(n)
    head = min(length - 1, n)  # rows 0..length-2 have fewer than `length` values behind them
    np.divide(sums[1:head + 1], np.arange(1, head + 1), out=mean[:head])
    if head < n:  # the rest: the last `length` values
        np.subtract(sums[length:], sums[:n + 1 - length], out=mean[head:])
        mean[head:] /= length
    return mean


def target_and_persistence(close: np.ndarray, log_range: np.ndarray, target: str,
                           horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(target, persistence), each (n_bars,) float64, indexed by the sample's last input bar.

    close: (n_bars,) closing prices; log_range: (n_bars,) log(high/low), the range column of
    bar_features. NaN where the bars to compute a value from do not exist (the last
    `horizon` bars for the target, the first `horizon` for persistence).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    n, h = len(close), horizon
    future = np.full(n, np.nan)
    past = np.full(n, np.nan)
    if target == "return":
        log_close = np.log(close)
        np.subtract(log_close[h:], log_close[: n - h], out=future[: n - h])
        past[h:] = future[: n - h]
    elif target == "close":
        future[: n - 1] = close[1:]
        past[:] = close
    elif n >= h:
        sums = np.cumsum(np.square(log_range, dtype=np.float64))  # sums[j] = sum of bars 0..j
        log_vol = np.empty(n - h + 1)  # [j]: bars j..j+h-1
        log_vol[0] = sums[h - 1]
        np.subtract(sums[h:], sums[: n - h], out=log_vol[1:])
        del sums
        log_vol /= h * 4 * math.log(2)  # Parkinson: mean(log(H/L)^2) / (4 ln 2) is a variance
        np.sqrt(log_vol, out=log_vol)
        np.maximum(log_vol, VOL_FLOOR, out=log_vol)
        np.log(log_vol, out=log_vol)
        future[: n - h] = log_vol[1:]  # bars i+1..i+h
        past[h - 1 :] = log_vol  # bars i-h+1..i
    return future, past
