"""The one look at the test segment: a chosen checkpoint, or the mean of several, and the baselines scored there.

Called once a configuration is chosen (never while choosing it): by `mamba-tune train` for its
best checkpoint and by a sweep for its winner, alone and as a seed ensemble (the mean forecast
of its runs on other seeds). Every loss is the data's objective's (data.objective, model/objectives.py), of
forecasts in scaled target units, like val_loss.

Per-sample losses (losses_on_test_segment, har_losses: squared errors under mse_log and mse, QLIKE or the
variance's squared error under the others) are the loss series a Diebold-Mariano test (model/diebold_mariano.py)
compares, the same objective for model and HAR; score_losses turns a model's series into the same scores as
score_on_test_segment, so a checkpoint is loaded once for both.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from model.backend import load_fused_kernel
from model.checkpoint import CheckpointError, load_checkpoint, trained_features
from model.config import ModelConfig
from model.data import Dataset
from model.errors import InputError
from model.forecaster import Forecaster
from model.objectives import mean_loss, per_sample_loss
from model.train_config import TrainConfig
from model.training import eval_batch_size, predict, resolve_device


class NoTestSegment(InputError, ValueError):
    """The data were split without a test segment (test_fraction 0)."""


def score_on_test_segment(checkpoint: str | Path, data: Dataset) -> dict[str, Any]:
    """{test_loss, baseline_har, baseline_persistence, baseline_mean, n_test} of the checkpoint's model.

    Evaluated on the device, precision and evaluation batch size the checkpoint trained with.
    """
    return score_losses(losses_on_test_segment([checkpoint], data), data)


def score_losses(losses: np.ndarray, data: Dataset) -> dict[str, Any]:
    """{test_loss, baseline_har, baseline_persistence, baseline_mean, n_test} from a model's per-sample losses
    (n_test,) on the test segment (losses_on_test_segment): score_on_test_segment without loading."""
    _require_test_segment(data)
    if np.shape(losses) != data.test_index.shape:
        raise ValueError(f"losses must hold one loss per test sample, shape {data.test_index.shape}, "
                         f"got {np.shape(losses)}")
    return {"test_loss": float(np.mean(losses)), **{f"baseline_{k}": v for k, v in data.test_baselines.items()},
            "n_test": len(data.test_index)}


def losses_on_test_segment(checkpoints: list[str | Path], data: Dataset) -> np.ndarray:
    """(n_test,) float64 loss (the objective's), per test sample in test_index order, of the mean forecast of the
    checkpoints' models (of one checkpoint: its model's own forecast); each checkpoint is loaded once.

    Their mean is score_on_test_segment's test_loss (one checkpoint) or score_ensemble's (several).
    """
    _require_test_segment(data)
    if not checkpoints:
        raise ValueError("checkpoints must name at least one checkpoint, got none")
    forecasts = [checkpoint_forecasts(c, data, data.test_index) for c in checkpoints]  # each (n_test,)
    return _losses(np.mean(forecasts, axis=0), data, data.test_index)


def har_losses(data: Dataset) -> np.ndarray:
    """(n_test,) float64 loss (the objective's) of HAR's forecast of each test sample (test_index order); its mean
    is data.test_baselines["har"]."""
    _require_test_segment(data)
    if data.test_har.shape != data.test_index.shape:
        raise ValueError(f"the dataset holds {len(data.test_har)} HAR test forecasts for {len(data.test_index)} "
                         "test samples; make it with model.data.load_dataset, which fills test_har")
    return _losses(data.test_har, data, data.test_index)


def score_ensemble(checkpoints: list[str | Path], data: Dataset) -> dict[str, Any]:
    """{val_loss, test_loss, member_test_losses, n_members} of the mean forecast of the checkpoints' models.

    The members must have been trained on the same samples and scaling as `data` (their runs on the
    validation segment); val_loss is the ensemble's on the validation samples, where each member was chosen.
    """
    _require_test_segment(data)
    both = np.concatenate([data.val_index, data.test_index])  # each model loaded once, for both segments
    forecasts = [checkpoint_forecasts(c, data, both) for c in checkpoints]  # each (n_val + n_test,)
    val = [f[:len(data.val_index)] for f in forecasts]  # each (n_val,)
    test = [f[len(data.val_index):] for f in forecasts]  # each (n_test,)
    return {"val_loss": _mean_loss(np.mean(val, axis=0), data, data.val_index),
            "test_loss": _mean_loss(np.mean(test, axis=0), data, data.test_index),
            "member_test_losses": [_mean_loss(f, data, data.test_index) for f in test], "n_members": len(checkpoints)}


def checkpoint_forecasts(checkpoint: str | Path, data: Dataset, index: np.ndarray) -> np.ndarray:
    """(n,) float64 scaled forecasts of the checkpoint's model for the samples ending at bars `index` (n,)."""
    payload = load_checkpoint(checkpoint)
    if "data" in payload:  # (a bare checkpoint, written by hand, records no data)
        require_features(checkpoint, trained_features(payload), data.summary["features"])
    config = TrainConfig.from_dict(payload["train_config"])
    device = resolve_device("auto" if config.device == "cuda" else config.device)  # a sweep's driver may have no GPU
    model_config = ModelConfig.from_saved(payload["model_config"])
    if device.type == "cuda" and model_config.backend == "auto" and load_fused_kernel()[0] is None:
        # prediction only, and both paths compute the same function: a look on a GPU without the kernels (a resumed
        # sweep's, whose trials trained elsewhere) reads the checkpoint on the torch path rather than failing
        model_config = dataclasses.replace(model_config, backend="torch")
    model = Forecaster(dataclasses.replace(model_config, n_features=data.n_features, n_targets=1)).to(device)
    model.load_state_dict(payload["model"])
    return predict(model, data, index, eval_batch_size(config, device), device, precision=config.precision)


def require_features(checkpoint: str | Path, trained: list[str], given: list[str]) -> None:
    """CheckpointError (one line) unless the bars give the features the checkpoint's model was trained on."""
    if trained == given:
        return
    if "volume_change" in trained and "volume_change" not in given:
        raise CheckpointError(f"{checkpoint}: the model was trained on bars with volume (volume_change is one of its "
                              "inputs), and these bars have no volume column; score it on bars with volume")
    raise CheckpointError(f"{checkpoint}: the model was trained on the features {', '.join(trained)}, and these "
                          f"data settings give {', '.join(given)}; score it with the settings it was trained with")


def _mean_loss(forecasts: np.ndarray, data: Dataset, index: np.ndarray) -> float:
    """Mean loss (the objective's) of forecasts (n,) against the targets of the samples ending at bars `index` (n,)."""
    return mean_loss(data.objective, np.asarray(forecasts, dtype=np.float64), data.targets[index].astype(np.float64),
                     data.objective_scale)


def _losses(forecasts: np.ndarray, data: Dataset, index: np.ndarray) -> np.ndarray:
    """(n,) float64 per-sample losses, by the data's objective, of forecasts (n,) against the targets of the samples
    ending at bars `index` (n,): squared errors under mse_log and mse."""
    return per_sample_loss(data.objective, np.asarray(forecasts, dtype=np.float64),
                           data.targets[index].astype(np.float64), data.objective_scale)


def _require_test_segment(data: Dataset) -> None:
    if not len(data.test_index):
        raise NoTestSegment("the data have no test segment (test_fraction 0), so there is nothing to score the model "
                            "on that it was not chosen on; set data.test_fraction above 0")
