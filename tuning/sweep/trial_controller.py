"""A trial's Ray Train controller and worker group: Ray Train's, started without a runtime environment of their own.

Ray Train gives its controller and each worker the Train settings of its parent's environment as
`runtime_env={"env_vars": ...}`, and an actor with a runtime environment is started through the node's runtime-env
agent: about 0.4 CPU-s more per process here (bench/actor_start.py). The sweep's settings (tuning/sweep/ray_env.py)
are in every Ray process already: inherited from the driver by a Ray started here, or the job's runtime environment on
a cluster, which every actor of the job inherits. The controller itself runs in a host process
(tuning/sweep/controller_host.py), started without one either.
Private hooks of Ray Train: `worker_group_cls` of the controller, `_get_worker_runtime_env` of the worker group
(checked against the Ray installed: tuning/sweep/fast_hooks.py, TrialWorkerGroup; a sweep uses this module only on the
fast path).
"""

from __future__ import annotations

from typing import Any

from ray.train.v2._internal.execution.controller import TrainController
from ray.train.v2._internal.execution.worker_group import WorkerGroup


class TrialWorkerGroup(WorkerGroup):
    """A trial's Train workers: started in the environment every Ray process of the sweep has."""

    @staticmethod
    def _get_worker_runtime_env(custom_runtime_env: dict[str, Any]) -> dict[str, Any]:
        return dict(custom_runtime_env)  # RunConfig.worker_runtime_env: {} for a trial


class TrialController(TrainController):
    """A trial's Train controller: Ray Train's, starting TrialWorkerGroups."""

    worker_group_cls = TrialWorkerGroup
