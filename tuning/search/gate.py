"""The milestone gate: a trial whose val_loss at the gate epoch is not good enough stops there.

Pure logic, no Ray: the sweep's scheduler asks `gate_decision` after every reported epoch.
Thresholds, all in the loss's own (scaled) units, and all must hold when several are set:
  threshold          val_loss <= threshold
  ratio_to_baseline  val_loss <= ratio * the validation loss of `baseline` (1.0: must beat it):
                     har (default: the strongest), persistence or mean (model/baselines.py)
  ratio_to_e0        val_loss <= ratio * the trial's own epoch-0 loss (0.9: 10% better than
                     initialisation; a trial still at its E0 loss learned nothing)
A non-finite val_loss stops a trial at any epoch.

`stop_reason` says, from a finished trial's last result, why it ended: completed (ran
max_epochs, through the gate even where it sits at the last epoch), asha, gate, nan or
error. The scheduler, the searcher and the leaderboard all ask it, so they never disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.baselines import BASELINES


@dataclass(frozen=True)
class GateConfig:
    epoch: int = 15  # the milestone epoch (epoch 0 is the evaluation before training)
    threshold: float | None = None  # val_loss at the gate epoch must be at most this; None: no such limit
    ratio_to_baseline: float | None = None  # val_loss <= this * the baseline's validation loss; None: no such limit
    ratio_to_e0: float | None = None  # val_loss <= this * the trial's own epoch-0 loss; None: no such limit
    baseline: str = "har"  # what ratio_to_baseline compares with

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {self.baseline!r}")
        if not isinstance(self.epoch, int) or isinstance(self.epoch, bool) or self.epoch < 1:
            raise ValueError(f"epoch must be a positive integer, got {self.epoch!r}")
        for name in ("threshold", "ratio_to_baseline", "ratio_to_e0"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                          and value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value!r}")

    def baseline_of(self, result: dict[str, Any]) -> float:
        """The validation loss of the gate's baseline in an epoch's result (NaN when a result predates it)."""
        return float(result.get(f"baseline_{self.baseline}", math.nan))

    def limit(self, e0_val_loss: float, baseline: float) -> float:
        """The highest val_loss that passes the gate (inf when no threshold is set)."""
        limits = [math.inf]
        if self.threshold is not None:
            limits.append(self.threshold)
        if self.ratio_to_baseline is not None:
            limits.append(self.ratio_to_baseline * baseline)
        if self.ratio_to_e0 is not None:
            limits.append(self.ratio_to_e0 * e0_val_loss)
        return min(limits)


def gate_decision(gate: GateConfig, epoch: int, val_loss: float, e0_val_loss: float, baseline: float) -> str | None:
    """Why the trial must stop after this epoch ("nan" or "gate"), or None to let it go on.

    epoch: the epoch just reported; val_loss: its validation loss; e0_val_loss: the
    trial's loss before training; baseline: the gate's baseline's validation loss (baseline_of).
    """
    if not math.isfinite(val_loss):
        return "nan"
    if epoch == gate.epoch and val_loss > gate.limit(e0_val_loss, baseline):
        return "gate"
    return None


STOP_REASONS = ("completed", "asha", "gate", "nan", "error")


INVALID = "invalid"  # the result key of a trial whose sampled combination the recipe refuses: why, in a line


def stop_reason(gate: GateConfig, max_epochs: int, last: dict | None, errored: bool) -> tuple[str, int]:
    """(why the trial ended, the epoch it ended at) from its last reported result.

    last: the trial's last result (epoch, val_loss, e0_val_loss, the baseline_* losses), or
    None when it reported nothing; errored: the trial raised. A trial that ended before
    max_epochs without tripping the gate or going non-finite was stopped by the stopping rule
    (ASHA, Hyperband or the median rule: recorded "asha", as before).
    """
    epoch = int(last["epoch"]) if last and "epoch" in last else 0
    if last and INVALID in last:  # a combination the recipe refuses: it never started (tuning/sweep/trainable.py)
        return "invalid", 0
    if errored or not last or "val_loss" not in last:
        return "error", epoch
    if not math.isfinite(last["val_loss"]):
        return "nan", epoch
    if gate_decision(gate, epoch, last["val_loss"], last["e0_val_loss"], gate.baseline_of(last)) == "gate":
        return "gate", epoch  # even at max_epochs: a gate at the last epoch failed is not a completed trial
    if epoch >= max_epochs:
        return "completed", epoch
    return "asha", epoch
