"""asha (the default): ASHA on the epoch behind the gate. Ray's AsyncHyperBandScheduler with one bracket, in units of
epochs: rungs at grace_period * reduction_factor^k; at a rung a trial goes on when it is in the top
1/reduction_factor of those recorded there before it, compared by best val_loss so far (the epoch a trial would be
kept at), so one noisy epoch does not stop a trial that is doing well. Its state, rebuilt on resume, is its rungs.
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import AsyncHyperBandScheduler

from tuning.search.curves import CurveSource, RecordedCurve
from tuning.search.gate import GateConfig
from tuning.search.scheduler_config import SchedulerConfig
from tuning.search.schedulers.gated import Gated


class GatedASHA(Gated, AsyncHyperBandScheduler):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig, curves: CurveSource | None = None) -> None:
        super().__init__(time_attr="epoch", metric="best_val_loss", mode="min", max_t=scheduler.max_epochs,
                         grace_period=scheduler.grace_period, reduction_factor=scheduler.reduction_factor,
                         brackets=self.bracket_count(scheduler))
        self.gated(gate, curves)

    @staticmethod
    def bracket_count(scheduler: SchedulerConfig) -> int:
        return 1

    def bracket_of(self, trial_id: str) -> Any:
        """The bracket a trial is in (ASHA has one)."""
        return self._brackets[0]

    def restore(self, curves: dict[str, RecordedCurve]) -> None:
        """Put each trial at every rung of its bracket it reached, with the value ASHA recorded it at: its best
        val_loss up to the rung's epoch. (A trial the gate or a non-finite loss stopped at a rung was recorded there
        too, when Tune ended it; a diverged epoch is not in the curve, so its best is the one before.)"""
        for trial_id, curve in curves.items():
            for milestone, recorded in self.bracket_of(trial_id)._rungs:
                best = curve.best_until(int(milestone))
                if best is not None and trial_id not in recorded:
                    recorded[trial_id] = self._metric_op * best

    def rungs(self) -> dict[int, dict[str, float]]:
        """Rung epoch -> trial id -> the best val_loss it was recorded at (what ASHA compares)."""
        (bracket,) = self._brackets
        return rung_table(self._metric_op, bracket)


def rung_table(metric_op: float, bracket: Any) -> dict[int, dict[str, float]]:
    """A bracket's rungs: epoch -> trial id -> the best val_loss it was recorded at."""
    return {int(m): {k: metric_op * v for k, v in recorded.items()} for m, recorded in bracket._rungs}
