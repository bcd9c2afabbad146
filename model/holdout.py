"""The one look at the test segment: a chosen checkpoint, or the mean of several, and the baselines scored there.

Called once a configuration is chosen (never while choosing it): by `mamba-tune train` for its
best checkpoint and by a sweep for its winner, alone and as a seed ensemble (the mean forecast
of its runs on other seeds). Everything is in scaled target units, like val_loss.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from model.checkpoint import load_checkpoint
from model.config import ModelConfig
from model.data import Dataset
from model.errors import InputError
from model.forecaster import Forecaster
from model.train_config import TrainConfig
from model.training import eval_batch_size, predict, resolve_device


class NoTestSegment(InputError, ValueError):
    """The data were split without a test segment (test_fraction 0)."""


def score_on_test_segment(checkpoint: str | Path, data: Dataset) -> dict[str, Any]:
    """{test_loss, baseline_har, baseline_persistence, baseline_mean, n_test} of the checkpoint's model.

    Evaluated on the device, precision and evaluation batch size the checkpoint trained with.
    """
    _require_test_segment(data)
    loss = _mse(checkpoint_forecasts(checkpoint, data, data.test_index), data, data.test_index)
    return {"test_loss": loss, **{f"baseline_{k}": v for k, v in data.test_baselines.items()},
            "n_test": len(data.test_index)}


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
    return {"val_loss": _mse(np.mean(val, axis=0), data, data.val_index),
            "test_loss": _mse(np.mean(test, axis=0), data, data.test_index),
            "member_test_losses": [_mse(f, data, data.test_index) for f in test], "n_members": len(checkpoints)}


def checkpoint_forecasts(checkpoint: str | Path, data: Dataset, index: np.ndarray) -> np.ndarray:
    """(n,) float64 scaled forecasts of the checkpoint's model for the samples ending at bars `index` (n,)."""
    payload = load_checkpoint(checkpoint)
    config = TrainConfig.from_dict(payload["train_config"])
    device = resolve_device("auto" if config.device == "cuda" else config.device)  # a sweep's driver may have no GPU
    model_config = ModelConfig.from_dict(payload["model_config"])
    model = Forecaster(dataclasses.replace(model_config, n_features=data.n_features, n_targets=1)).to(device)
    model.load_state_dict(payload["model"])
    return predict(model, data, index, eval_batch_size(config, device), device, precision=config.precision)


def _mse(forecasts: np.ndarray, data: Dataset, index: np.ndarray) -> float:
    """Mean squared error of forecasts (n,) against the targets of the samples ending at bars `index` (n,)."""
    return float(np.mean((forecasts - data.targets[index].astype(np.float64)) ** 2))


def _require_test_segment(data: Dataset) -> None:
    if not len(data.test_index):
        raise NoTestSegment("the data have no test segment (test_fraction 0), so there is nothing to score the model "
                            "on that it was not chosen on; set data.test_fraction above 0")
