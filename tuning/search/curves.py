"""How far a sweep's search trials got: what the scheduler of a resumed or extended sweep rebuilds its rungs
from (tuning/search/scheduler.py). Plain data, without Ray Tune: a trial's workers read and write curves too
(tuning/sweep/trial_files.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RecordedCurve:
    """How far a trial got before a resume: its val_loss by epoch (E0 first; a diverged epoch is not in it)
    and the last epoch it reported."""

    val_loss: tuple[float, ...]
    last_epoch: int


class CurveSource(Protocol):
    """How far the sweep's search trials got (tuning/sweep/trial_files.py's SweepCurves). It must pickle: Tune
    saves it with the scheduler."""

    def recorded(self) -> dict[str, RecordedCurve]:
        """Trial id -> curve of each search trial the ledger holds (on the validation segment)."""
        ...

    def unrecorded(self, trial_id: str) -> RecordedCurve | None:
        """The curve of a trial the ledger does not hold, from its checkpoints; None when the ledger holds it (at
        any stage) or it has no checkpoint."""
        ...
