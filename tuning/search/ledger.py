"""A sweep's record of its finished trials: trials.json in the sweep folder.

Written by the sweep as each trial ends (atomically, so an interrupted sweep keeps every
finished trial); read by the leaderboard, `mamba-tune best` and `mamba-tune resume`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from model.atomic import write_text_atomic


@dataclass(frozen=True)
class TrialRecord:
    trial_id: str
    params: dict[str, Any]  # learning_rate, weight_decay, batch_size as sampled
    stop_reason: str  # completed | asha | gate | nan | error
    stop_epoch: int
    best_val_loss: float  # scaled target units; inf when no epoch was finite
    best_epoch: int
    e0_val_loss: float  # the trial's loss before training
    baseline_persistence: float
    train_s: float  # seconds inside fit's loop (epochs and E0), summed over the trial's reports
    val_curve: tuple[float, ...] = ()  # val_loss of epochs 0, 1, ... as checkpointed (a diverged epoch is not)
    baseline_har: float = math.nan  # the yardstick's validation loss (NaN in a ledger from before it)
    stage: str = "search"  # search | confirm (a finalist trained again: tuning/search/finalists.py)
    seed: int | None = None  # a confirmation run's train.seed (search trials: the run's own)
    fold: int = 1  # a confirmation run's walk-forward fold (1: the validation segment)
    finalist: str | None = None  # the search trial a confirmation run confirms

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrialRecord:
        return cls(**{**values, "val_curve": tuple(values.get("val_curve", ()))})

    def final_result(self) -> dict[str, Any]:
        """The trial's last result as Tune, its scheduler and its searcher read it (for a trial ended again)."""
        return {"epoch": self.stop_epoch, "val_loss": self.val_curve[-1] if self.val_curve else self.best_val_loss,
                "best_val_loss": self.best_val_loss, "best_epoch": self.best_epoch, "e0_val_loss": self.e0_val_loss,
                "baseline_persistence": self.baseline_persistence, "baseline_har": self.baseline_har}


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, TrialRecord] = {}
        if path.exists():
            self.records = {r["trial_id"]: TrialRecord.from_dict(r) for r in json.loads(path.read_text())}

    def add(self, record: TrialRecord) -> None:
        self.records[record.trial_id] = record
        rows = [asdict(r) for r in self.records.values()]
        write_text_atomic(self.path, json.dumps(rows, indent=1))  # inf / NaN as Python's json writes them


def leaderboard(records: list[TrialRecord]) -> list[TrialRecord]:
    """The search trials: completed first, then by best val_loss (non-finite last)."""
    return sorted((r for r in records if r.stage == "search"), key=lambda r: (r.stop_reason != "completed",
                                          r.best_val_loss if math.isfinite(r.best_val_loss) else math.inf))


def best_record(records: list[TrialRecord]) -> TrialRecord | None:
    """The completed search trial with the lowest val_loss (None when none completed)."""
    completed = [r for r in records if r.stage == "search" and r.stop_reason == "completed"
                 and math.isfinite(r.best_val_loss)]
    return min(completed, key=lambda r: r.best_val_loss, default=None)
