"""ASHA on the epoch, with the milestone gate and the non-finite stop in front of it.

A Ray Tune scheduler: after every reported epoch it answers CONTINUE or STOP. The gate's
decision is tuning/search/gate.py's pure function; ASHA (Ray's AsyncHyperBandScheduler, one
bracket) decides the rest, in units of epochs: rungs at grace_period * reduction_factor^k,
comparing trials by their best val_loss so far (the epoch a trial would be kept at), so
one noisy epoch does not stop a trial that is doing well.
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

from tuning.search.gate import GateConfig, gate_decision
from tuning.search.space import SchedulerConfig


class GatedASHA(AsyncHyperBandScheduler):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig) -> None:
        super().__init__(time_attr="epoch", metric="best_val_loss", mode="min", max_t=scheduler.max_epochs,
                         grace_period=scheduler.grace_period, reduction_factor=scheduler.reduction_factor,
                         brackets=1)
        self.gate = gate

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if gate_decision(self.gate, result["epoch"], result["val_loss"], result["e0_val_loss"],
                         result["baseline_persistence"]) is not None:
            return TrialScheduler.STOP  # the gate's stop, or a non-finite loss: ASHA never sees it
        return super().on_trial_result(tune_controller, trial, result)
