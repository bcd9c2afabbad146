"""hyperband: Hyperband as Ray runs it asynchronously (AsyncHyperBandScheduler with `brackets` brackets) behind the
gate. Bracket s has its first rung at grace_period * reduction_factor^s, so bracket 0 is ASHA and each further one
gives its trials longer before the first cut. Ray puts a new trial in a bracket at random (weights e^(rungs - most
rungs)); here the same weights pick it from a stable hash of the trial's id (schedulers/brackets.py), so a scheduler
rebuilt on resume puts each recorded trial, and each trial Tune re-adds, in the bracket it had. Its state, rebuilt on
resume, is each bracket's rungs. `brackets` is the config's resolved count (SchedulerConfig: the most that fit, up to
3, where the space does not write it).
"""

from __future__ import annotations

from typing import Any

from tuning.search.scheduler_config import SchedulerConfig
from tuning.search.schedulers.asha import GatedASHA, rung_table
from tuning.search.schedulers.brackets import bracket_index

__all__ = ["GatedHyperband", "bracket_index"]


class GatedHyperband(GatedASHA):
    @staticmethod
    def bracket_count(scheduler: SchedulerConfig) -> int:
        return scheduler.brackets

    def bracket_of(self, trial_id: str) -> Any:
        return self._brackets[bracket_index(trial_id, [len(b._rungs) for b in self._brackets])]

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_add(tune_controller, trial)  # the rebuild, and Ray's random bracket, replaced here:
        self._trial_info[trial.trial_id] = self.bracket_of(trial.trial_id)

    def bracket_rungs(self) -> list[dict[int, dict[str, float]]]:
        """For each bracket: rung epoch -> trial id -> the best val_loss it was recorded at."""
        return [rung_table(self._metric_op, bracket) for bracket in self._brackets]

