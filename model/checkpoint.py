"""Checkpoint files: written atomically, loaded with weights_only=True."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.atomic import atomic_path
from model.errors import InputError


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
