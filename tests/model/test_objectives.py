"""model/objectives.py: the losses against hand computations, their minima, numpy and torch alike; the setting
data.objective; the dataset, training and evaluation under each objective."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from model.config import ModelConfig
from model.data import DataConfig, load_dataset
from model.forecaster import Forecaster
from model.objectives import (
    EXP_CAP,
    OBJECTIVES,
    ObjectiveScale,
    mean_loss,
    per_sample_loss,
    resolve_objective,
    scaled_log_volatility,
    variance_of,
)
from model.train import ResumeMismatch, TrainConfig, fit
from model.training import evaluate
from tests.bars import write_bars

TINY_MODEL = ModelConfig(d_model=16, n_layers=1, d_state=8, headdim=8, chunk_size=16)
HALF = ObjectiveScale(mean=-3.0, std=0.5, variance_mean=2.0)  # s = 0.5: u = 2 s (y - f) = y - f


def as_tensor(values) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values, dtype=np.float64))


# -- the losses by hand -------------------------------------------------------------------------------------------
def test_qlike_matches_pattons_formula_worked_by_hand():
    """s = 0.5, so u = log(σ²/h) = y - f whatever m: y - f = 1 gives σ²/h = e and e - 1 - 1; y - f = ln 2 gives
    2 - ln 2 - 1; y = f gives 0; y - f = -1 gives 1/e + 1 - 1."""
    y = np.array([1.0, math.log(2), 0.7, 0.0])
    f = np.array([0.0, 0.0, 0.7, 1.0])
    expected = np.array([math.e - 2, 1 - math.log(2), 0.0, math.exp(-1)])
    assert_close(as_tensor(per_sample_loss("qlike", f, y, HALF)), as_tensor(expected))


def test_qlike_is_sigma2_over_h_minus_its_log_minus_one_from_the_variances():
    y, f = np.array([0.3, -1.2, 2.0]), np.array([-0.4, 0.5, 1.1])
    sigma2, h = variance_of(y, HALF), variance_of(f, HALF)  # exp(2(y s + m)), exp(2(f s + m))
    assert_close(as_tensor(per_sample_loss("qlike", f, y, HALF)), as_tensor(sigma2 / h - np.log(sigma2 / h) - 1))


def test_mse_var_matches_the_variance_error_worked_by_hand():
    """m = 0, s = 0.5, v̄ = 2: y = ln 3 is σ² = exp(2 * 0.5 * ln 3) = 3, f = 0 is h = 1: ((3 - 1) / 2)² = 1;
    y = 0 (σ² = 1) and f = ln 5 (h = 5): ((1 - 5) / 2)² = 4."""
    scale = ObjectiveScale(mean=0.0, std=0.5, variance_mean=2.0)
    y, f = np.array([math.log(3), 0.0]), np.array([0.0, math.log(5)])
    assert_close(as_tensor(per_sample_loss("mse_var", f, y, scale)), as_tensor([1.0, 4.0]))
    assert mean_loss("mse_var", f, y, scale) == pytest.approx(2.5)


@pytest.mark.parametrize("name", ["mse_log", "mse"])
def test_mse_log_and_mse_are_the_squared_error_of_the_old_formula(name):
    f, y = torch.randn(50, 1, generator=torch.Generator().manual_seed(0)), torch.randn(50, 1)
    assert torch.equal(per_sample_loss(name, f, y, HALF), torch.nn.functional.mse_loss(f, y, reduction="none"))
    assert torch.equal(per_sample_loss(name, f, y, HALF).sum(), torch.nn.functional.mse_loss(f, y, reduction="sum"))
    assert_close(as_tensor(per_sample_loss(name, f.numpy(), y.numpy(), HALF)), (f.double() - y.double()) ** 2)


# -- minima --------------------------------------------------------------------------------------------------------
def test_qlike_is_minimised_at_the_true_variance_of_a_noisy_proxy():
    """Patton's robustness: with a proxy σ̂² = σ² ε, E[ε] = 1 (a chi-squared over 4 bars / 4), the mean QLIKE over
    forecasts h is lowest at h = σ², while the mean squared log error is lowest at exp(E log σ̂²) < σ²."""
    rng = np.random.default_rng(0)
    sigma2 = 0.04
    proxy = sigma2 * rng.chisquare(4, 20_000) / 4  # (n,) unbiased, noisy
    scale = ObjectiveScale(mean=0.0, std=1.0)  # y = log σ̂: scaled units are log-volatility units
    y = 0.5 * np.log(proxy)
    grid = sigma2 * np.exp(np.linspace(-0.4, 0.4, 161))  # forecasts h around σ², 0.5% apart
    qlike = [mean_loss("qlike", np.full_like(y, 0.5 * np.log(h)), y, scale) for h in grid]
    mse_log = [mean_loss("mse_log", np.full_like(y, 0.5 * np.log(h)), y, scale) for h in grid]
    assert_close(torch.tensor(grid[np.argmin(qlike)]), torch.tensor(sigma2, dtype=torch.float64), rtol=0.015, atol=0)
    assert grid[np.argmin(mse_log)] < 0.85 * sigma2  # the biased one: E log χ²₄/4 = -0.27


@pytest.mark.parametrize("name", ["qlike", "mse_var", "mse_log"])
def test_each_loss_is_zero_at_the_target_and_positive_elsewhere(name):
    y = np.linspace(-2, 2, 9)
    assert_close(as_tensor(per_sample_loss(name, y, y, HALF)), as_tensor(np.zeros(9)))
    assert (per_sample_loss(name, y + 0.3, y, HALF) > 0).all() and (per_sample_loss(name, y - 0.3, y, HALF) > 0).all()


# -- numpy and torch, shapes, safety --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", OBJECTIVES)
@pytest.mark.parametrize("shape", [(40,), (40, 3)])
def test_numpy_and_torch_give_the_same_losses_in_the_same_shape(name, shape):
    rng = np.random.default_rng(1)
    f, y = rng.normal(size=shape), rng.normal(size=shape)
    numpy_losses = per_sample_loss(name, f, y, HALF)
    torch_losses = per_sample_loss(name, torch.from_numpy(f), torch.from_numpy(y), HALF)
    assert numpy_losses.shape == shape and tuple(torch_losses.shape) == shape
    assert_close(torch_losses, torch.from_numpy(numpy_losses))
    assert_close(per_sample_loss(name, torch.from_numpy(f).float(), torch.from_numpy(y).float(), HALF),
                 torch.from_numpy(numpy_losses).float(), rtol=1e-4, atol=1e-6)  # float32, as training runs
    assert mean_loss(name, torch.from_numpy(f), torch.from_numpy(y), HALF).item() == pytest.approx(
        mean_loss(name, f, y, HALF))


def test_the_exponent_cap_leaves_normal_values_exactly_the_formulas():
    u = np.linspace(-30, EXP_CAP, 1001)  # σ²/h from e^-30 to e^40: the formula's own numbers
    assert np.array_equal(per_sample_loss("qlike", np.zeros_like(u), u, ObjectiveScale(0.0, 0.5)), np.expm1(u) - u)


@pytest.mark.parametrize("name", ["qlike", "mse_var"])
def test_a_forecast_far_off_gives_a_finite_loss_and_gradient(name):
    forecast = torch.tensor([-100.0, -45.0, 0.0, 45.0, 100.0], requires_grad=True)  # σ²/h from e^-100 to e^100
    loss = per_sample_loss(name, forecast, torch.zeros(5), ObjectiveScale(0.0, 0.5)).sum()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(forecast.grad).all()


def test_qlike_is_continuous_at_the_exponent_cap():
    below, above = EXP_CAP - 1e-9, EXP_CAP + 1e-9
    values = per_sample_loss("qlike", np.zeros(2), np.array([below, above]), ObjectiveScale(0.0, 0.5))
    assert values[1] == pytest.approx(values[0], rel=1e-6)


def test_per_sample_loss_refuses_shapes_that_would_broadcast_and_unknown_names():
    with pytest.raises(ValueError, match=r"forecast and target must have one shape, got \(3, 1\) and \(3,\)"):
        per_sample_loss("mse_log", np.zeros((3, 1)), np.zeros(3), HALF)
    with pytest.raises(ValueError, match=r"objective must be one of mse_log, mse_var, qlike, mse, got 'mae'"):
        per_sample_loss("mae", np.zeros(3), np.zeros(3), HALF)


def test_scaled_log_volatility_inverts_variance_of():
    y = np.array([-1.5, 0.0, 2.5])
    assert_close(as_tensor(scaled_log_volatility(variance_of(y, HALF), HALF)), as_tensor(y))


# -- the setting -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "objective", "loss"), [
    ("volatility", None, "mse_log"), ("return", None, "mse"), ("close", None, "mse"),
    ("volatility", "qlike", "qlike"), ("volatility", "mse_var", "mse_var"), ("return", "mse", "mse")])
def test_data_config_loss_is_the_objective_or_the_targets_default(target, objective, loss):
    assert DataConfig(target=target, objective=objective).loss == loss
    assert DataConfig.from_dict(DataConfig(target=target, objective=objective).to_dict()).loss == loss


@pytest.mark.parametrize(("values", "match"), [
    ({"target": "return", "objective": "qlike"},
     r"^data.objective qlike: QLIKE ranks variance forecasts, and target return is not one; use mse or target "
     r"volatility$"),
    ({"target": "close", "objective": "mse_var"}, r"^data.objective mse_var: .*target close is not one; use mse "),
    ({"objective": "mse"}, r"^data.objective mse: mse is for return and close, and target volatility is not one; "
                           r"use mse_log, mse_var or qlike$"),
    ({"objective": "mae"}, r"^objective must be one of mse_log, mse_var, qlike, mse \(or unset: the target's "
                           r"default\), got 'mae'$"),
])
def test_data_config_refuses_an_objective_that_does_not_fit_the_target_in_one_line(values, match):
    with pytest.raises(ValueError, match=match):
        DataConfig(**values)
    with pytest.raises(ValueError, match=match):
        resolve_objective(values["objective"], values.get("target", "volatility"))


# -- the dataset, evaluation and training under each objective ------------------------------------------------------
@pytest.fixture(scope="module")
def whole_datasets(tmp_path_factory):
    """The same 1,500 synthetic bars under each volatility objective."""
    path = write_bars(tmp_path_factory.mktemp("bars") / "bars.parquet", 1500, seed=3)
    return {objective: load_dataset(path, DataConfig(window=32, horizon=6, objective=objective))
            for objective in ("mse_log", "mse_var", "qlike")}


@pytest.fixture(scope="module")
def datasets(whole_datasets):
    """whole_datasets cut to few samples: fast epochs."""
    return {objective: dataclasses.replace(data, train_index=data.train_index[::16], val_index=data.val_index[:64])
            for objective, data in whole_datasets.items()}


def test_dataset_records_its_objective_and_the_training_mean_variance(whole_datasets):
    for objective, data in whole_datasets.items():
        assert data.summary["objective"] == data.objective == objective
    data = whole_datasets["qlike"]
    variance = variance_of(data.targets[data.train_index].astype(np.float64), data.objective_scale)  # (n_train,) σ²
    assert data.variance_mean == data.summary["variance_mean"]
    assert_close(torch.tensor(data.variance_mean, dtype=torch.float64), torch.tensor(variance.mean()), rtol=1e-4,
                 atol=0)


@pytest.mark.parametrize("objective", ["mse_log", "mse_var", "qlike"])
def test_an_untrained_residual_model_scores_hars_baseline_under_each_objective(datasets, objective):
    """The head starts at zero: the model forecasts the objective's HAR, so its validation loss is baseline_har."""
    data = datasets[objective]
    torch.manual_seed(0)
    model = Forecaster(dataclasses.replace(TINY_MODEL, n_features=data.n_features, residual=True))
    val_loss = evaluate(model, data, data.val_index, 64, torch.device("cpu"))
    har = per_sample_loss(objective, data.features[data.val_index, -1].astype(np.float64),
                          data.targets[data.val_index].astype(np.float64), data.objective_scale)
    assert_close(torch.tensor(val_loss, dtype=torch.float64), torch.tensor(har.mean()), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("objective", ["mse_var", "qlike"])
def test_training_one_tiny_epoch_under_a_variance_objective_gives_finite_losses(datasets, objective):
    result = fit(TrainConfig(epochs=1, batch_size=64, lr=3e-3, device="cpu"), TINY_MODEL, datasets[objective])
    assert result.status == "completed"
    assert [m["epoch"] for m in result.history] == [0, 1]
    assert all(math.isfinite(m["train_loss"]) and math.isfinite(m["val_loss"]) for m in result.history)
    assert result.history[1]["baseline_har"] == datasets[objective].baselines["har"]


def test_resuming_a_run_under_another_objective_is_refused(datasets, tmp_path):
    config = TrainConfig(epochs=1, batch_size=64, device="cpu")
    fit(config, TINY_MODEL, datasets["qlike"], checkpoint_dir=tmp_path)
    with pytest.raises(ResumeMismatch, match="was trained with other data"):
        fit(config, TINY_MODEL, datasets["mse_var"], checkpoint_dir=tmp_path, resume=True)
