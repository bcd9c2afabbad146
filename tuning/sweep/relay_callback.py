"""The Ray Train callback that sends a trial's reports to the sweep's relay (tuning/sweep/report_relay.py).

It runs in the trial's Train controller, in the controller's host (tuning/sweep/controller_host.py), which unpickles it:
this module imports neither torch nor Ray Tune.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.train import UserCallback


class RelayReports(UserCallback):
    """On the trial's Train controller: each report of rank 0 (with its checkpoint's path) to the relay, naming
    the controller's host (the actor the relay has abort the run, or kills)."""

    def __init__(self, relay: ray.actor.ActorHandle, trial_id: str) -> None:
        self.relay, self.trial_id = relay, trial_id

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        result = dict(metrics[0])
        if checkpoint:
            result["checkpoint_path"] = checkpoint.path  # as TuneReportCallback names it
        ray.get(self.relay.put.remote(self.trial_id, result, ray.get_runtime_context().current_actor))
