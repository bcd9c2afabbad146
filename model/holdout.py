"""The one look at the test segment: a chosen checkpoint and the baselines, scored on the test samples.

Called once a configuration is chosen (never while choosing it): by `mamba-tune train` for its
best checkpoint and by a sweep for its winner. Everything is in scaled target units, like val_loss.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from model.checkpoint import load_checkpoint
from model.config import ModelConfig
from model.data import Dataset
from model.errors import InputError
from model.forecaster import Forecaster
from model.train_config import TrainConfig
from model.training import eval_batch_size, evaluate, resolve_device


class NoTestSegment(InputError, ValueError):
    """The data were split without a test segment (test_fraction 0)."""


def score_on_test_segment(checkpoint: str | Path, data: Dataset) -> dict[str, Any]:
    """{test_loss, baseline_har, baseline_persistence, baseline_mean, n_test} of the checkpoint's model.

    Evaluated on the device, precision and evaluation batch size the checkpoint trained with.
    """
    if not len(data.test_index):
        raise NoTestSegment("the data have no test segment (test_fraction 0), so there is nothing to score the model "
                            "on that it was not chosen on; set data.test_fraction above 0")
    payload = load_checkpoint(checkpoint)
    config = TrainConfig.from_dict(payload["train_config"])
    device = resolve_device("auto" if config.device == "cuda" else config.device)  # a sweep's driver may have no GPU
    model_config = ModelConfig.from_dict(payload["model_config"])
    model = Forecaster(dataclasses.replace(model_config, n_features=data.n_features, n_targets=1)).to(device)
    model.load_state_dict(payload["model"])
    loss = evaluate(model, data, data.test_index, eval_batch_size(config, device), device, precision=config.precision)
    return {"test_loss": loss, **{f"baseline_{k}": v for k, v in data.test_baselines.items()},
            "n_test": len(data.test_index)}
