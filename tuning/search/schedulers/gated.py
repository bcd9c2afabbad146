"""What every stopping rule of a sweep shares: the gate in front of it, and its state rebuilt from recorded curves.

After every reported epoch the scheduler answers CONTINUE or STOP. A result of a combination the recipe refuses
(INVALID), a non-finite loss and the gate's stop (tuning/search/gate.py's pure function) stop the trial before the
rule sees the result; the rule (ASHA, Hyperband, the median rule, none) decides the rest.

One sweep's search may span several Tune experiments (`tune/`, then `tune-to-N/` for each `resume --trials N`), and
Ray Tune does not save the scheduler with an experiment: a restored one gets it as it was pickled at the
experiment's start, its state empty, and a new one starts empty. So each rebuilds its state at the first trial
added to it, from the search trials the ledger holds (`curves.recorded()`: the search's validation curves, never a
confirmation run's); restored, it then places each trial Tune re-adds that the ledger does not hold yet (one running
when the sweep was interrupted) from that trial's own checkpoints (`curves.unrecorded`), until the first result.
Tune re-adds an experiment's trials before any trial reports again, so a resumed or extended sweep stops the trials
one uninterrupted scheduler would have stopped. What a rule's state is, and how a curve is put into it, is the
rule's `restore`.
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import TrialScheduler

from tuning.search.curves import CurveSource, RecordedCurve
from tuning.search.gate import INVALID, GateConfig, gate_decision


def stopped_before_the_rule(gate: GateConfig, result: dict[str, Any]) -> bool:
    """Whether a result stops its trial whatever the rule: a refused combination (it reports once and ends), a
    non-finite val_loss, or the gate's verdict at its epoch."""
    if INVALID in result:
        return True
    return gate_decision(gate, result["epoch"], result["val_loss"], result["e0_val_loss"],
                         gate.baseline_of(result)) is not None


class Gated:
    """A mixin in front of a Ray Tune scheduler (`class GatedX(Gated, RaySchedulerX)`): the gate's stops before
    the rule, and the rule's state rebuilt from `curves` (None: it starts empty)."""

    gate: GateConfig
    curves: CurveSource | None

    def gated(self, gate: GateConfig, curves: CurveSource | None) -> None:
        """Set up the gate and the rebuild; called by each rule's __init__ after its Ray scheduler's."""
        self.gate = gate
        self.curves = curves  # where the state is rebuilt from (None: it starts empty)
        self.rebuilt = False  # the state holds the ledger's search trials (done at the first trial added)
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
                self.restore(recorded)
            if self.replaying and trial.trial_id not in self.recorded_ids:
                running = self.curves.unrecorded(trial.trial_id)
                if running is not None:
                    self.restore({trial.trial_id: running})
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]

    def restore(self, curves: dict[str, RecordedCurve]) -> None:
        """Put each trial's curve into the rule's state as an uninterrupted run would have it (trial id -> how far
        it got); a rule without state has nothing to do."""

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        self.replaying = False  # a trial reports: Tune has re-added every trial of a restored experiment
        if stopped_before_the_rule(self.gate, result):
            return TrialScheduler.STOP  # the rule never sees it
        return super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
