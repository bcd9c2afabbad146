"""model/baselines.py: HAR's lookbacks and inputs written out by hand, its fit, and the scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.baselines import fit_har, har_forecast, har_lookbacks, past_quantities, scored_baselines

RNG = np.random.default_rng(0)
CLOSE = 100 * np.exp(np.cumsum(RNG.normal(0, 0.01, 300)))  # (300,)
LOG_RANGE = np.abs(RNG.normal(0.01, 0.003, 300))  # (300,)


def test_har_lookbacks_are_one_bar_the_horizon_and_its_multiples_without_repeats():
    assert har_lookbacks(12) == (1, 12, 48, 120)
    assert har_lookbacks(1) == (1, 4, 10)


def by_hand(target, i, length):
    start = max(0, i - length + 1)
    if target == "return":
        return np.log(CLOSE[i] / CLOSE[max(0, i - length)])
    if target == "close":
        return CLOSE[start : i + 1].mean()
    return np.log(np.sqrt(np.mean(LOG_RANGE[start : i + 1] ** 2) / (4 * np.log(2))))


@pytest.mark.parametrize("target", ["volatility", "return", "close"])
def test_past_quantities_match_the_quantity_written_out(target):
    lookbacks = (1, 5, 20)
    past = past_quantities(CLOSE, LOG_RANGE, target, lookbacks)
    assert past.shape == (300, 3) and past.dtype == np.float32
    expected = np.array([[by_hand(target, i, n) for n in lookbacks] for i in range(300)])
    torch.testing.assert_close(torch.from_numpy(past.astype(np.float64)), torch.from_numpy(expected),
                               rtol=1e-6, atol=1e-6)


def test_past_quantities_reject_an_unknown_target():
    with pytest.raises(ValueError, match=r"target must be one of return, volatility, close, got 'price'"):
        past_quantities(CLOSE, LOG_RANGE, "price", (1,))


def test_fit_har_recovers_a_linear_rule_from_the_training_rows_alone():
    past = RNG.normal(size=(200, 2)).astype(np.float32)  # (n_bars, n_lookbacks)
    target = 0.5 + 2.0 * past[:, 0].astype(np.float64) - 1.0 * past[:, 1]
    train = np.arange(0, 120)
    target[120:] = 1e6  # rows the fit must not read
    coefficients = fit_har(past, target, train)
    torch.testing.assert_close(torch.from_numpy(coefficients), torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64))
    forecast = har_forecast(past, coefficients, np.array([150, 151]))
    torch.testing.assert_close(torch.from_numpy(forecast), torch.from_numpy(
        0.5 + 2.0 * past[[150, 151], 0].astype(np.float64) - past[[150, 151], 1]))


def test_scored_baselines_are_mean_squared_errors_on_the_samples():
    target = np.array([0.0, 1.0, -1.0, 2.0])  # (n_bars,) scaled
    persistence = np.array([0.0, 0.0, 0.0, 1.0])
    scores = scored_baselines(target, persistence, har=np.array([1.5, 2.5]), index=np.array([1, 3]))
    assert scores == pytest.approx({"har": 0.25, "persistence": 1.0, "mean": 2.5})
