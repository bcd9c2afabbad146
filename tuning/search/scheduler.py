"""ASHA on the epoch, with the milestone gate and the non-finite stop in front of it.

A Ray Tune scheduler: after every reported epoch it answers CONTINUE or STOP. The gate's
decision is tuning/search/gate.py's pure function; ASHA (Ray's AsyncHyperBandScheduler, one
bracket) decides the rest, in units of epochs: rungs at grace_period * reduction_factor^k,
comparing trials by their best val_loss so far (the epoch a trial would be kept at), so
one noisy epoch does not stop a trial that is doing well.

Ray Tune does not save the scheduler with the sweep: `resume` gets it as it was pickled at the
start, its rungs empty. So a restored GatedASHA rebuilds them from the curves the trials
recorded (`curves`, read when Tune re-adds the sweep's trials, before any trial reports again),
and a resumed sweep stops the trials an uninterrupted one would have stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

from tuning.search.gate import GateConfig, gate_decision
from tuning.search.space import SchedulerConfig


@dataclass(frozen=True)
class RecordedCurve:
    """How far a trial got before a resume: its val_loss by epoch (E0 first; a diverged epoch is not in it)
    and the last epoch it reported."""

    val_loss: tuple[float, ...]
    last_epoch: int


class GatedASHA(AsyncHyperBandScheduler):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig,
                 curves: Callable[[], dict[str, RecordedCurve]] | None = None) -> None:
        super().__init__(time_attr="epoch", metric="best_val_loss", mode="min", max_t=scheduler.max_epochs,
                         grace_period=scheduler.grace_period, reduction_factor=scheduler.reduction_factor,
                         brackets=1)
        self.gate = gate
        self.curves = curves  # trial id -> its recorded curve, read on resume (it must pickle: Tune saves it)
        self.restored = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled: `resume` has it from the sweep's start (one pickled by an older version has no curves)."""
        self.__dict__.update({"curves": None, **state, "restored": True})

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        if self.restored:  # the first trial a resume re-adds: no trial has reported since the start
            self.restored = False
            if self.curves is not None:
                self.restore_rungs(self.curves())
        super().on_trial_add(tune_controller, trial)

    def restore_rungs(self, curves: dict[str, RecordedCurve]) -> None:
        """Put each trial at every rung it reached, with the value ASHA recorded it at: its best val_loss up to
        the rung's epoch. (A trial the gate or a non-finite loss stopped at a rung was recorded there too,
        when Tune ended it; a diverged epoch is not in the curve, so its best is the one before.)"""
        (bracket,) = self._brackets
        for trial_id, curve in curves.items():
            for milestone, recorded in bracket._rungs:
                finite = [v for v in curve.val_loss[: int(milestone) + 1] if math.isfinite(v)]
                if milestone <= curve.last_epoch and finite and trial_id not in recorded:
                    recorded[trial_id] = self._metric_op * min(finite)

    def rungs(self) -> dict[int, dict[str, float]]:
        """Rung epoch -> trial id -> the best val_loss it was recorded at (what ASHA compares)."""
        (bracket,) = self._brackets
        return {int(m): {k: self._metric_op * v for k, v in recorded.items()} for m, recorded in bracket._rungs}

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if gate_decision(self.gate, result["epoch"], result["val_loss"], result["e0_val_loss"],
                         self.gate.baseline_of(result)) is not None:
            return TrialScheduler.STOP  # the gate's stop, or a non-finite loss: ASHA never sees it
        return super().on_trial_result(tune_controller, trial, result)
