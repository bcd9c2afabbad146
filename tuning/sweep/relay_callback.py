"""The Ray Train callback that sends a trial's reports to the sweep's relay (tuning/sweep/report_relay.py).

It runs in the trial's Train controller: on the fast path in the controller's host (tuning/sweep/controller_host.py),
which unpickles it (this module imports neither torch nor Ray Tune); on the public path in Ray Train's own controller
actor.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.train import UserCallback


class RelayReports(UserCallback):
    """On the trial's Train controller: each report of rank 0 (with its checkpoint's path) to the relay, naming
    the controller's actor: a host the relay has abort the run (`hosted`, the fast path), else Ray Train's own
    controller, which the relay kills to end the run."""

    def __init__(self, relay: ray.actor.ActorHandle, trial_id: str, hosted: bool = True) -> None:
        self.relay, self.trial_id, self.hosted = relay, trial_id, hosted

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        result = dict(metrics[0])
        if checkpoint:
            result["checkpoint_path"] = checkpoint.path  # as TuneReportCallback names it
        ray.get(self.relay.put.remote(self.trial_id, result, ray.get_runtime_context().current_actor, self.hosted))
