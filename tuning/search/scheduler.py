"""ASHA on the epoch, with the milestone gate and the non-finite stop in front of it.

A Ray Tune scheduler: after every reported epoch it answers CONTINUE or STOP. The gate's
decision is tuning/search/gate.py's pure function; ASHA (Ray's AsyncHyperBandScheduler, one
bracket) decides the rest, in units of epochs: rungs at grace_period * reduction_factor^k,
comparing trials by their best val_loss so far (the epoch a trial would be kept at), so
one noisy epoch does not stop a trial that is doing well.

One sweep's search may span several Tune experiments (`tune/`, then `tune-to-N/` for each
`resume --trials N`), and Ray Tune does not save the scheduler with an experiment: a restored one
gets it as it was pickled at the experiment's start, its rungs empty, and a new one starts empty.
So each GatedASHA rebuilds its rungs at the first trial added to it, from the search trials the
ledger holds (`curves.recorded()`: the search's validation curves, never a confirmation run's);
restored, it then places each trial Tune re-adds that the ledger does not hold yet (one running
when the sweep was interrupted) from that trial's own checkpoints (`curves.unrecorded`), until the
first result. Tune re-adds an experiment's trials before any trial reports again, so a resumed or
extended sweep stops the trials one uninterrupted scheduler would have stopped.
"""

from __future__ import annotations

import math
from typing import Any

from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

from tuning.search.curves import CurveSource, RecordedCurve
from tuning.search.gate import INVALID, GateConfig, gate_decision
from tuning.search.space import SchedulerConfig


class GatedASHA(AsyncHyperBandScheduler):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig, curves: CurveSource | None = None) -> None:
        super().__init__(time_attr="epoch", metric="best_val_loss", mode="min", max_t=scheduler.max_epochs,
                         grace_period=scheduler.grace_period, reduction_factor=scheduler.reduction_factor,
                         brackets=1)
        self.gate = gate
        self.curves = curves  # where the rungs are rebuilt from (None: they start empty)
        self.rebuilt = False  # the rungs hold the ledger's search trials (done at the first trial added)
        self.replaying = False  # restored, no trial has reported yet: the trials added are Tune's re-added ones
        self.recorded_ids: frozenset[str] = frozenset()  # the trials the rebuild placed from their records

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled: a restored experiment's, as pickled at its start (one pickled by an older version has no
        curves, and a `restored` flag in place of `rebuilt` and `replaying`)."""
        state = {k: v for k, v in state.items() if k != "restored"}
        self.__dict__.update({"curves": None, **state, "rebuilt": False, "replaying": True,
                              "recorded_ids": frozenset()})

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        if self.curves is not None:
            if not self.rebuilt:  # the first trial added: no trial has reported to this scheduler
                self.rebuilt = True
                recorded = self.curves.recorded()
                self.recorded_ids = frozenset(recorded)
                self.restore_rungs(recorded)
            if self.replaying and trial.trial_id not in self.recorded_ids:
                running = self.curves.unrecorded(trial.trial_id)
                if running is not None:
                    self.restore_rungs({trial.trial_id: running})
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
        self.replaying = False  # a trial reports: Tune has re-added every trial of a restored experiment
        if INVALID in result:  # a combination the recipe refuses: it reports once and ends
            return TrialScheduler.STOP
        if gate_decision(self.gate, result["epoch"], result["val_loss"], result["e0_val_loss"],
                         self.gate.baseline_of(result)) is not None:
            return TrialScheduler.STOP  # the gate's stop, or a non-finite loss: ASHA never sees it
        return super().on_trial_result(tune_controller, trial, result)
