"""How far a sweep's search trials got: what the scheduler of a resumed or extended sweep rebuilds its state
from (tuning/search/schedulers/). Plain data, without Ray Tune: a trial's workers read and write curves too
(tuning/sweep/trial_files.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RecordedCurve:
    """How far a trial got before a resume: its val_loss by epoch (E0 first; a diverged epoch is not in it)
    and the last epoch it reported."""

    val_loss: tuple[float, ...]
    last_epoch: int

    def best_until(self, epoch: int) -> float | None:
        """The trial's best_val_loss as it reported it at `epoch`: its best finite val_loss up to that epoch (a
        diverged epoch, not in the curve, reports the best before it); None past its last epoch or with none."""
        finite = [v for v in self.val_loss[: epoch + 1] if math.isfinite(v)]
        return min(finite) if finite and epoch <= self.last_epoch else None


class CurveSource(Protocol):
    """How far the sweep's search trials got (tuning/sweep/trial_files.py's SweepCurves). It must pickle: Tune
    saves it with the scheduler."""

    def recorded(self) -> dict[str, RecordedCurve]:
        """Trial id -> curve of each search trial the ledger holds (on the validation segment), and of each trial a
        warm start on the same bars added to the study (prior knowledge, under an id no Ray trial has)."""
        ...

    def unrecorded(self, trial_id: str) -> RecordedCurve | None:
        """The curve of a trial the ledger does not hold, from its checkpoints; None when the ledger holds it (at
        any stage) or it has no checkpoint."""
        ...
