"""Features and targets against their documented formulas, on hand-made bars."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model.bars import Bars
from model.features import bar_features, target_and_persistence

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


@pytest.mark.parametrize("target", ["return", "volatility", "close"])
def test_targets_and_persistence_follow_their_formulas(target):
    h, i = 5, 20
    future, past = target_and_persistence(CLOSE, bar_features(BARS)[:, 1], target, h)

    def parkinson(bars):
        return math.log(math.sqrt(np.mean(np.log(HIGH[bars] / LOW[bars]) ** 2) / (4 * math.log(2))))

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
