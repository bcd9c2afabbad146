"""model/holdout.py: per-sample losses (the objective's) on the test segment, of checkpoints and of HAR, and their scores."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from model import holdout
from model.checkpoint import save_atomic
from model.config import ModelConfig
from model.forecaster import Forecaster
from model.train_config import TrainConfig

SMALL_MODEL = ModelConfig(d_model=32, n_layers=2, d_state=16, headdim=16, chunk_size=16)


def write_checkpoint(path, data, seed, head_std=0.3):
    """An untrained residual Forecaster whose head is random (std head_std; 0: it forecasts HAR exactly)."""
    config = dataclasses.replace(SMALL_MODEL, n_features=data.n_features, residual=data.residual)
    torch.manual_seed(seed)
    model = Forecaster(config)
    with torch.no_grad():
        model.head.weight.normal_(std=head_std)  # std 0: zeros
    save_atomic({"model": model.state_dict(), "model_config": config.to_dict(),
                 "train_config": TrainConfig(device="cpu").to_dict()}, path)
    return path


@pytest.fixture(scope="module")
def checkpoints(small_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("checkpoints")
    return [write_checkpoint(folder / f"seed-{seed}.pt", small_data, seed) for seed in (1, 2)]


def test_losses_on_test_segment_mean_is_the_test_loss(small_data, checkpoints):
    losses = holdout.losses_on_test_segment(checkpoints[:1], small_data)
    assert losses.shape == small_data.test_index.shape and losses.dtype == np.float64
    scores = holdout.score_on_test_segment(checkpoints[0], small_data)
    assert_close(float(losses.mean()), scores["test_loss"])
    assert holdout.score_losses(losses, small_data) == scores


def test_losses_on_test_segment_of_several_is_the_ensembles_mean_forecast(small_data, checkpoints):
    losses = holdout.losses_on_test_segment(checkpoints, small_data)  # (n_test,)
    assert_close(float(losses.mean()), holdout.score_ensemble(checkpoints, small_data)["test_loss"])
    alone = [holdout.losses_on_test_segment([c], small_data) for c in checkpoints]
    assert abs(losses.mean() - np.mean(alone)) > 1e-4  # the loss of the mean forecast, not the members' mean loss


def test_har_losses_mean_is_the_har_baseline(small_data):
    losses = holdout.har_losses(small_data)
    assert losses.shape == small_data.test_index.shape
    assert_close(float(losses.mean()), small_data.test_baselines["har"])


def test_losses_on_test_segment_of_an_untrained_residual_model_are_hars(small_data, tmp_path):
    assert small_data.residual  # the model's last input is HAR's forecast, which a zero head passes through
    checkpoint = write_checkpoint(tmp_path / "har.pt", small_data, seed=3, head_std=0)
    model = holdout.losses_on_test_segment([checkpoint], small_data)
    assert_close(model, holdout.har_losses(small_data), rtol=1e-5, atol=1e-6)  # the input is float32


def test_score_losses_refuses_a_series_of_another_length(small_data):
    n_test = len(small_data.test_index)
    with pytest.raises(ValueError, match=rf"one loss per test sample, shape \({n_test},\), "
                                         rf"got \({n_test - 1},\)"):
        holdout.score_losses(np.zeros(n_test - 1), small_data)


def test_losses_on_test_segment_needs_a_checkpoint(small_data):
    with pytest.raises(ValueError, match="checkpoints must name at least one checkpoint, got none"):
        holdout.losses_on_test_segment([], small_data)


def test_har_losses_refuses_a_dataset_without_har_test_forecasts(small_data):
    made_by_hand = dataclasses.replace(small_data, test_har=np.empty(0))
    with pytest.raises(ValueError, match=r"holds 0 HAR test forecasts for \d+ test samples; make it with "
                                         r"model.data.load_dataset"):
        holdout.har_losses(made_by_hand)


def test_har_losses_without_a_test_segment_is_no_test_segment(small_data):
    without = dataclasses.replace(small_data, test_index=np.empty(0, np.int64), test_har=np.empty(0))
    with pytest.raises(holdout.NoTestSegment, match=r"no test segment \(test_fraction 0\)"):
        holdout.har_losses(without)


@pytest.fixture(scope="module")
def qlike_data(small_data):
    """small_data's bars under QLIKE: the same samples, HAR fitted by QLIKE, every loss QLIKE's."""
    from model.data import DataConfig, load_dataset

    return load_dataset(small_data.summary["path"], DataConfig(window=32, horizon=6, objective="qlike"))


def test_har_losses_under_qlike_are_hars_qlike_losses_and_their_mean_the_baseline(qlike_data):
    from model.objectives import per_sample_loss

    losses = holdout.har_losses(qlike_data)  # (n_test,)
    expected = per_sample_loss("qlike", qlike_data.test_har, qlike_data.targets[qlike_data.test_index],
                               qlike_data.objective_scale)
    assert_close(losses, expected)
    assert_close(float(losses.mean()), qlike_data.test_baselines["har"])


def test_test_losses_of_an_untrained_residual_model_under_qlike_are_hars(qlike_data, tmp_path):
    """Model and HAR are scored by the same objective: a model that forecasts HAR loses exactly what HAR loses."""
    checkpoint = write_checkpoint(tmp_path / "har.pt", qlike_data, seed=3, head_std=0)
    model = holdout.losses_on_test_segment([checkpoint], qlike_data)  # (n_test,) QLIKE
    assert_close(model, holdout.har_losses(qlike_data), rtol=1e-5, atol=1e-6)
    assert holdout.score_losses(model, qlike_data)["baseline_har"] == qlike_data.test_baselines["har"]


@pytest.mark.parametrize(("kernels", "backend"), [(None, "torch"), (object(), "auto")])
def test_checkpoint_forecasts_on_a_gpu_without_the_kernels_reads_the_checkpoint_on_the_torch_path(
        small_data, checkpoints, monkeypatch, kernels, backend):
    """A look on a GPU machine whose kernels do not load (a resumed sweep's): backend auto would refuse to run there,
    so the checkpoint is read on the torch path (the same function); with the kernels, auto stays. The GPU is faked
    where it enters (the device holdout resolves, the kernel import); the model runs on CPU."""
    built = []

    class Recording(Forecaster):
        def __init__(self, config):
            built.append(config.backend)
            super().__init__(dataclasses.replace(config, backend="torch"))

        def to(self, device):
            return self

    monkeypatch.setattr(holdout, "resolve_device", lambda setting: torch.device("cuda"))
    monkeypatch.setattr(holdout, "load_fused_kernel", lambda: (kernels, "import mamba_ssm: ModuleNotFoundError"))
    monkeypatch.setattr(holdout, "Forecaster", Recording)
    monkeypatch.setattr(holdout, "predict", lambda model, data, index, batch, device, precision: np.zeros(len(index)))
    holdout.checkpoint_forecasts(checkpoints[0], small_data, small_data.test_index)
    assert built == [backend]
