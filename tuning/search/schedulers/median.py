"""median: Ray's MedianStoppingRule on the epoch, behind the gate. From grace_period on, a trial stops when its best
so far is worse than the median, over the other trials that got at least as far (min_samples of them at least), of
their running means from grace_period to this epoch.

The metric is best_val_loss, not val_loss: the figure ASHA compares and the sweep ranks trials by (the epoch a trial
would be kept at), so a trial's best is set against the others' curves of the same figure, and one noisy epoch of
theirs neither helps nor hurts it; a curve's best_val_loss at every epoch is its running minimum, which a recorded
curve gives exactly.

Where Ray's rule differs from what a sweep needs, this one says so: its trials are told apart by id (Ray keys them by
the Trial object, which a restored experiment makes anew); each epoch is recorded once (Ray records a trial's last
result a second time when it ends, and again each epoch a trial resumed from its checkpoint reports anew); and with
too few others to compare with a trial goes on (Ray would pause it to let a waiting trial run, which restarts it
from its checkpoint). Its state, rebuilt on resume, is each trial's best_val_loss by epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ray.tune.schedulers import MedianStoppingRule, TrialScheduler

from tuning.search.curves import CurveSource, RecordedCurve
from tuning.search.gate import INVALID, GateConfig
from tuning.search.scheduler_config import SchedulerConfig
from tuning.search.schedulers.gated import Gated

TIME, METRIC = "epoch", "best_val_loss"


@dataclass(frozen=True)
class TrialKey:
    """A trial as the rule keeps it: by its id alone (equal across Tune's Trial objects of one trial)."""

    trial_id: str


class GatedMedian(Gated, MedianStoppingRule):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig, curves: CurveSource | None = None) -> None:
        super().__init__(time_attr=TIME, metric=METRIC, mode="min", grace_period=scheduler.grace_period,
                         min_samples_required=scheduler.min_samples, hard_stop=True)
        self._last_pause = {}  # Ray's, a defaultdict of a lambda, does not pickle; unread here (no pauses)
        self.gated(gate, curves)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        key = TrialKey(trial.trial_id)
        if TIME in result:  # a trial resumed from its checkpoint reports its later epochs anew
            self._keep(key, [r for r in self._results.get(key, []) if r[TIME] < result[TIME]])
        decision = super().on_trial_result(tune_controller, key, result)
        self._stopped_trials.discard(key)  # Ray asserts a stopped trial never reports again; one in flight may
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        """Record the last result where the rule has not (a trial the gate stopped): as a curve records it."""
        if INVALID not in result and TIME in result:
            self.record(trial.trial_id, int(result[TIME]), float(result.get(METRIC, math.nan)))

    def record(self, trial_id: str, epoch: int, best_val_loss: float) -> None:
        """Keep a trial's best_val_loss at `epoch`, unless it has one there or it is not finite."""
        key = TrialKey(trial_id)
        results = self._results.get(key, [])
        if math.isfinite(best_val_loss) and all(r[TIME] != epoch for r in results):
            self._keep(key, sorted([*results, {TIME: epoch, METRIC: best_val_loss}], key=lambda r: r[TIME]))

    def _keep(self, key: TrialKey, results: list[dict[str, Any]]) -> None:
        """Set a trial's results; none: no entry (Ray reads the last result of every trial it holds)."""
        if results:
            self._results[key] = results
        else:
            self._results.pop(key, None)

    def restore(self, curves: dict[str, RecordedCurve]) -> None:
        """Each trial's best_val_loss at each epoch it reported: the running minimum of its finite val_loss."""
        for trial_id, curve in curves.items():
            for epoch in range(curve.last_epoch + 1):
                best = curve.best_until(epoch)
                if best is not None:
                    self.record(trial_id, epoch, best)

    def recorded(self) -> dict[str, dict[int, float]]:
        """Trial id -> epoch -> the best_val_loss the rule keeps (what it compares)."""
        return {key.trial_id: {r[TIME]: r[METRIC] for r in results} for key, results in self._results.items()
                if results}

    def _on_insufficient_samples(self, tune_controller: Any, trial: Any, time: float) -> str:
        return TrialScheduler.CONTINUE
