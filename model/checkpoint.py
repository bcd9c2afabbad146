"""Checkpoint files: written atomically, loaded with weights_only=True.

A checkpoint's "data" (model/training.py's data_identity) records the names of the features the model was trained
on, in order ("features": model/features.py's feature_names); trained_features reads them, and gives a checkpoint
written before they were recorded the list it was trained on: every bar feature, volume_change included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.atomic import atomic_path
from model.errors import InputError
from model.features import feature_names


def save_atomic(payload: dict[str, Any], path: str | Path) -> None:
    """torch.save through a temporary file: a crash or a full disk leaves the previous file intact."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(payload, handle)


class CheckpointError(InputError, ValueError):
    """A checkpoint that cannot be used: unreadable, unsafe, or made for another run."""


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by save_atomic; only tensors and plain values (weights_only)."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # damaged, truncated, or holding objects weights_only refuses
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: cannot load the checkpoint ({reason}); train into a new --out") from None


def trained_features(checkpoint: dict[str, Any]) -> list[str]:
    """The names of the features the checkpoint's model reads, in order (its data's "features"); for a checkpoint
    from before they were recorded, those its data settings gave then (bars had volume: volume_change included)."""
    data = checkpoint["data"]
    if "features" in data:
        return list(data["features"])
    return feature_names(tuple(data.get("vol_lookbacks", ())), data.get("residual_to") == "har",
                         tuple(data.get("leverage_lookbacks", ())), volume=True)
