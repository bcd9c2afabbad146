"""model/baselines.py: HAR's lookbacks and inputs written out by hand, its fit, and the scores."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from model.baselines import (
    fit_har,
    fit_har_for,
    har_forecast,
    har_from_summary,
    har_lookbacks,
    past_quantities,
    scored_baselines,
)
from model.features import target_and_persistence
from model.objectives import ObjectiveScale, mean_loss, variance_of
from model.synth import synth_bars

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


# -- HAR and the baselines under each objective (model/objectives.py) -------------------------------------------------
def synthetic_volatility(horizon=6, n_bars=2000, seed=3):
    """tests/bars.py's synthetic bars -> (past (n, k), scaled target (n,), training rows (n_train,), scale)."""
    table = synth_bars(n_bars, seed=seed)
    close, high, low = (table.column(name).to_numpy() for name in ("close", "high", "low"))
    log_range = np.log(high) - np.log(low)
    target, _ = target_and_persistence(close, log_range, "volatility", horizon)  # (n,) log σ, NaN at the end
    past = past_quantities(close, log_range, "volatility", har_lookbacks(horizon))
    train = np.arange(0, int(0.7 * n_bars))
    mean, std = float(target[train].mean()), float(target[train].std())
    scale = ObjectiveScale(mean, std, float(np.mean(np.exp(2 * target[train]))))
    return past, (target - mean) / std, train, scale


@pytest.mark.parametrize("objective", ["mse_log", "mse_var", "qlike"])
def test_har_forecasts_a_positive_finite_variance_of_every_sample_under_each_objective(objective):
    past, target, train, scale = synthetic_volatility()
    har = fit_har_for(objective, past, target, train, scale)
    forecast = har.forecast(past, np.arange(len(past)), scale)  # (n_bars,) scaled log volatility
    variance = variance_of(forecast, scale)
    assert np.isfinite(forecast).all() and (variance > 0).all()


def test_har_for_mse_log_is_the_least_squares_fit_of_before():
    past, target, train, scale = synthetic_volatility()
    har = fit_har_for("mse_log", past, target, train, scale)
    assert np.array_equal(har.coefficients, fit_har(past, target, train)) and har.fit == "ols_log"
    assert har.to_summary((1, 6, 24, 60)) == {"lookbacks": [1, 6, 24, 60], "coefficients": har.coefficients.tolist()}


def test_har_for_qlike_minimises_the_training_qlike_and_is_unbiased_in_variance():
    """At QLIKE's minimum the intercept's gradient is 0: the training mean of σ²/h is 1; and its training QLIKE is
    below the least-squares fit's, where it started."""
    past, target, train, scale = synthetic_volatility()
    har = fit_har_for("qlike", past, target, train, scale)
    forecast = har.forecast(past, train, scale)
    ratio = variance_of(target[train], scale) / variance_of(forecast, scale)  # (n_train,) σ²/h
    assert_close(torch.tensor(ratio.mean()), torch.tensor(1.0, dtype=torch.float64), rtol=1e-6, atol=0)
    ols = har_forecast(past, fit_har(past, target, train), train)
    assert mean_loss("qlike", forecast, target[train], scale) < mean_loss("qlike", ols, target[train], scale)
    assert har_from_summary(har.to_summary((1, 6, 24, 60))).fit == "qlike_log"


def test_har_for_mse_var_is_least_squares_on_variance_levels_floored_at_the_smallest_training_variance():
    past, target, train, scale = synthetic_volatility()
    har = fit_har_for("mse_var", past, target, train, scale)
    sigma2 = variance_of(target[train], scale)  # (n_train,)
    design = np.column_stack([np.ones(len(train)), np.exp(2 * past[train].astype(np.float64))])
    expected, *_ = np.linalg.lstsq(design, sigma2, rcond=None)
    assert_close(torch.from_numpy(har.coefficients), torch.from_numpy(expected))
    assert har.variance_floor == pytest.approx(sigma2.min())
    calm = np.full((1, past.shape[1]), -30.0, np.float32)  # past variances of e^-60: the level's intercept alone
    negative = dataclasses.replace(har, coefficients=np.array([-1.0, *har.coefficients[1:]]))  # a level below 0
    floored = variance_of(negative.forecast(calm, np.array([0]), scale), scale)
    assert_close(torch.from_numpy(floored), torch.tensor([sigma2.min()], dtype=torch.float64))
    again = har_from_summary(har.to_summary((1, 6, 24, 60)))
    assert (again.fit, again.variance_floor) == ("ols_variance", har.variance_floor)


def test_fit_har_for_refuses_an_unknown_objective():
    past, target, train, scale = synthetic_volatility()
    with pytest.raises(ValueError, match=r"objective must be one of mse_log, mse, qlike, mse_var, got 'mae'"):
        fit_har_for("mae", past, target, train, scale)


@pytest.mark.parametrize("objective", ["mse_log", "mse_var", "qlike"])
def test_scored_baselines_are_the_objectives_mean_losses(objective):
    scale = ObjectiveScale(mean=-4.0, std=0.5, variance_mean=4e-4)
    target = np.array([0.0, 1.0, -1.0, 2.0])  # (n_bars,) scaled
    persistence = np.array([0.0, 0.0, 0.5, 1.0])
    har, index = np.array([1.5, 2.5]), np.array([1, 3])
    scores = scored_baselines(target, persistence, har=har, index=index, objective=objective, scale=scale)
    actual = target[index]
    assert scores == pytest.approx({"har": mean_loss(objective, har, actual, scale),
                                    "persistence": mean_loss(objective, persistence[index], actual, scale),
                                    "mean": mean_loss(objective, np.zeros(2), actual, scale)})
