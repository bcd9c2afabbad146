"""Features and targets against their documented formulas, on hand-made bars."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from model.bars import Bars
from model.features import (
    BAR_FEATURES,
    bar_features,
    feature_names,
    target_and_persistence,
    trailing_log_volatility,
    trailing_mean_fall,
)

RNG = np.random.default_rng(0)
N = 40
CLOSE = 100 * np.exp(np.cumsum(RNG.normal(0, 0.01, N)))
OPEN = np.concatenate([[100.0], CLOSE[:-1]])
HIGH = np.maximum(OPEN, CLOSE) * (1 + RNG.uniform(0, 0.01, N))
LOW = np.minimum(OPEN, CLOSE) * (1 - RNG.uniform(0, 0.01, N))
VOLUME = RNG.integers(100, 1000, N).astype(float)
HOUR = 3600 * 10**9
BARS = Bars("hand-made", np.arange(N, dtype=np.int64) * HOUR + 6 * HOUR, OPEN, HIGH, LOW, CLOSE, VOLUME)


def close(a, b):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                               rtol=1e-5, atol=1e-6)


def test_bar_features_follow_their_formulas():
    f = bar_features(BARS)
    t = 7
    close(f[t], [math.log(CLOSE[t] / CLOSE[t - 1]), math.log(HIGH[t] / LOW[t]), math.log(CLOSE[t] / OPEN[t]),
                 math.log(HIGH[t] / max(OPEN[t], CLOSE[t])), math.log(min(OPEN[t], CLOSE[t]) / LOW[t]),
                 math.log1p(VOLUME[t]) - math.log1p(VOLUME[t - 1]),
                 math.sin(2 * math.pi * (t + 6) / 24), math.cos(2 * math.pi * (t + 6) / 24)])
    close(f[0, [0, 5]], [0.0, 0.0])


def test_time_of_day_reads_the_bars_clock_so_a_new_york_open_keeps_its_value_across_daylight_saving():
    opens = np.array(["2024-03-08T14:30", "2024-03-11T13:30",  # 09:30 New York: EST (UTC-5), then EDT (UTC-4)
                      "2024-11-01T13:30", "2024-11-04T14:30"], dtype="datetime64[ns]").view(np.int64)  # and back
    n = len(opens)
    ny = Bars("new-york", opens, OPEN[:n], HIGH[:n], LOW[:n], CLOSE[:n], VOLUME[:n], timezone="America/New_York")
    clock = bar_features(ny)[:, 6:8]  # (n_bars, 2): sin, cos of the time of day
    half_past_nine = 2 * math.pi * 9.5 / 24
    close(clock, np.tile([math.sin(half_past_nine), math.cos(half_past_nine)], (n, 1)))
    utc = bar_features(dataclasses.replace(ny, timezone="UTC"))[:, 6]  # read in UTC, the open moves an hour
    assert abs(utc[0] - utc[1]) > 0.1 and abs(utc[2] - utc[3]) > 0.1


def parkinson(bars):
    """The log Parkinson volatility of the hand-made bars `bars` (a slice), written out."""
    return math.log(math.sqrt(np.mean(np.log(HIGH[bars] / LOW[bars]) ** 2) / (4 * math.log(2))))


def test_volatility_features_follow_their_formula_and_start_at_bar_0():
    lookbacks = (1, 4, 10)
    f = bar_features(BARS, lookbacks, har=True)
    assert f.shape == (N, 12) and feature_names(lookbacks, True, volume=True) == [
        *BAR_FEATURES, "vol_1", "vol_4", "vol_10", "har"]
    close(f[:, :8], bar_features(BARS))  # the bar features unchanged, first
    t = 25
    close(f[t, 8:11], [parkinson(slice(t, t + 1)), parkinson(slice(t - 3, t + 1)), parkinson(slice(t - 9, t + 1))])
    close(f[2, 8:11], [parkinson(slice(2, 3)), parkinson(slice(0, 3)), parkinson(slice(0, 3))])  # near the start
    close(f[:, 11], np.zeros(N))  # har: filled by the data pipeline once HAR is fitted
    short = trailing_log_volatility(np.log(HIGH[:5] / LOW[:5]), (10,))  # a lookback longer than the bars
    close(short[:, 0], [parkinson(slice(0, t + 1)) for t in range(5)])


def mean_fall(bars):
    """The mean of min(log return, 0) over the hand-made bars `bars` (a slice; bar 0's return is 0), written out."""
    returns = np.log(CLOSE[1:] / CLOSE[:-1])
    return np.mean(np.minimum(np.concatenate([[0.0], returns])[bars], 0.0))


def test_fall_features_follow_their_formula_after_the_volatilities_and_before_har():
    f = bar_features(BARS, (1, 4), har=True, leverage_lookbacks=(1, 3, 10))
    assert f.shape == (N, 14) and feature_names((1, 4), True, (1, 3, 10), volume=True) == [
        *BAR_FEATURES, "vol_1", "vol_4", "fall_1", "fall_3", "fall_10", "har"]
    close(f[:, :10], bar_features(BARS, (1, 4)))  # the bar and volatility features unchanged, first
    t = 25
    close(f[t, 10:13], [mean_fall(slice(t, t + 1)), mean_fall(slice(t - 2, t + 1)), mean_fall(slice(t - 9, t + 1))])
    close(f[2, 10:13], [mean_fall(slice(2, 3)), mean_fall(slice(0, 3)), mean_fall(slice(0, 3))])  # near the start
    assert (f[:, 10:13] <= 0).all() and (f[:, 10:13] < 0).any()  # falls only: a rise counts as 0
    close(f[:, 13], np.zeros(N))
    short = trailing_mean_fall(f[:5, 0], (10,))  # a lookback longer than the bars
    close(short[:, 0], [mean_fall(slice(0, t + 1)) for t in range(5)])


def test_bars_without_volume_give_every_feature_but_volume_change_found_by_name():
    lookbacks, leverage = (1, 4), (1, 3)
    names = feature_names(lookbacks, True, leverage, volume=False)
    with_volume = feature_names(lookbacks, True, leverage, volume=True)
    assert names == [n for n in with_volume if n != "volume_change"] and "volume_change" in with_volume
    without = bar_features(dataclasses.replace(BARS, volume=None), lookbacks, True, leverage)  # (N, 14)
    full = bar_features(BARS, lookbacks, True, leverage)  # (N, 15)
    assert without.shape == (N, len(names)) == (N, len(with_volume) - 1)
    kept = [with_volume.index(n) for n in names]
    torch.testing.assert_close(torch.from_numpy(without), torch.from_numpy(full[:, kept]), rtol=0, atol=0)


@pytest.mark.parametrize("t", [1, 17, N - 1])
def test_changing_bar_t_changes_no_feature_before_t(t):
    """No look-ahead: every feature of bar s < t is computed from bars 0..s alone."""
    lookbacks = (1, 5, 12)
    before = bar_features(BARS, lookbacks, leverage_lookbacks=lookbacks)
    changed = Bars("changed", BARS.timestamp, *(np.array(a) for a in (OPEN, HIGH, LOW, CLOSE, VOLUME)))
    changed.high[t] *= 1.5
    changed.close[t] *= 0.8  # a fall, so that the fall features of bar t change too
    changed.volume[t] *= 3
    after = bar_features(changed, lookbacks, leverage_lookbacks=lookbacks)
    torch.testing.assert_close(torch.from_numpy(after[:t]), torch.from_numpy(before[:t]), rtol=0, atol=0)
    assert not np.allclose(after[t], before[t])  # (the change does reach bar t itself)
    assert not np.allclose(after[t, -3:], before[t, -3:])  # its falls included


@pytest.mark.parametrize("target", ["return", "volatility", "close"])
def test_targets_and_persistence_follow_their_formulas(target):
    h, i = 5, 20
    future, past = target_and_persistence(CLOSE, bar_features(BARS)[:, 1], target, h)
    expected = {
        "return": (math.log(CLOSE[i + h] / CLOSE[i]), math.log(CLOSE[i] / CLOSE[i - h])),
        "volatility": (parkinson(slice(i + 1, i + h + 1)), parkinson(slice(i - h + 1, i + 1))),
        "close": (CLOSE[i + 1], CLOSE[i]),
    }[target]
    close([future[i], past[i]], expected)
    assert np.isnan(future[-1]) and np.isfinite(future[: N - h]).all()


def test_target_and_persistence_rejects_an_unknown_target():
    with pytest.raises(ValueError, match=r"target must be one of return, volatility, close, got 'price'"):
        target_and_persistence(CLOSE, CLOSE, "price", 3)
