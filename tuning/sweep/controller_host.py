"""Where a trial's Ray Train controller runs: a host process that outlives it, reused by the trials of a Tune actor.

Ray Train starts each run's TrainController as an actor of its own, a process per trial: about 1.5 CPU-s here to
start it and import Ray Train in it (bench/trial_start.py), paid again by every trial of a sweep. The sweep reuses
its Tune actors trial after trial; each one keeps its hosts and runs the controller of each of its trials in one:

    Tune actor (lean_trainer.fit) ── host.run(controller's arguments) ──▶ ControllerHost: TrialController.run()
                                                                              └─▶ the trial's workers

In the host, a run is what it is in Ray Train's own controller actor: the same TrainController, run on the host's
event loop, reporting through the same callbacks, handing the same Result back. What differs is how a run ends
early. Ray Train's `abort` ends the controller's process; the host's aborts the run alone: the control loop
cancelled (it neither polls nor restarts workers again), the worker group aborted (its workers and synchronization
actor killed, its placement group removed), the state set to aborted, and the host ready for the next trial.
`abort` takes the run's name and aborts nothing else, so a late abort never reaches the next trial's run. A host
that does not answer is killed (tuning/sweep/report_relay.py); the workers it owns end with it, and the next trial
starts another host.

This rests on Ray Train's controller, checked against the Ray installed (tuning/sweep/fast_hooks.py, ControllerHost):
`TrainController.run`, `get_result`, `get_state`, `get_worker_group` and the before_controller_abort hook.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import ray
from ray.train.v2._internal.execution.controller.state import AbortedState

from tuning.sweep.host_barrier import CONCURRENCY_GROUPS, HostBarrier, serve_barriers
from tuning.sweep.trial_controller import TrialController

LOG = logging.getLogger(__name__)


class ControllerHost(HostBarrier):
    """A process that runs trials' Train controllers one after another (an async actor, as Ray Train's controller),
    and keeps their workers' barrier (tuning/sweep/host_barrier.py)."""

    def __init__(self) -> None:
        self.controller: TrialController | None = None
        self.running: asyncio.Future | None = None

    async def run(self, controller_init_kwargs: dict[str, Any]) -> Any:
        """Run a Train run to its end, or until `abort`; -> its Result (Ray Train's, as its controller builds it)."""
        serve_barriers(self)
        self.controller = TrialController(**controller_init_kwargs)
        self.running = asyncio.ensure_future(self.controller.run())
        try:
            await self.running
        except asyncio.CancelledError:
            if not self.controller.get_state().is_terminal():  # cancelled by Ray, not by abort: pass it on
                raise
        return self.controller.get_result()

    async def abort(self, name: str | None = None) -> None:
        """Abort the run in progress if it is named `name` (None: whatever run is in progress: Ray Train's Ctrl-C)."""
        controller, running = self.controller, self.running
        if controller is None or running is None or controller.get_state().is_terminal():
            return
        if name is not None and run_name(controller) != name:
            return
        running.cancel()  # before anything else: the loop must not see the workers die and start others
        controller._controller_callback_manager.invoke_best_effort("before_controller_abort")
        try:  # as Ray Train's own abort: a worker group still starting (or one shut down) raises, and is logged
            if (worker_group := controller.get_worker_group()) is not None:
                worker_group.abort()
        except Exception:  # noqa: BLE001 - an abort that raised would have the relay kill this host, maybe mid next run
            LOG.exception("aborting the worker group of run %s", run_name(controller))
        controller._set_state(AbortedState())  # its hooks' failures are caught and logged by the controller

    async def get_all_reported_checkpoints(self, *args: Any, **kwargs: Any) -> Any:
        """For a worker's `ray.train.get_all_reported_checkpoints`: the host is its controller's actor."""
        assert self.controller is not None
        return await self.controller.get_all_reported_checkpoints(*args, **kwargs)


def run_name(controller: TrialController) -> str:
    """The name of a controller's run (RunConfig.name: a trial's id)."""
    return controller._train_run_context.run_config.name


class HostPool:
    """This process's idle hosts. A run takes one (or starts one, on this node) and gives it back once it has ended;
    a host that has died (killed by the relay) is dropped and another started."""

    def __init__(self) -> None:
        self.idle: list[ray.actor.ActorHandle] = []
        self.lock = threading.Lock()

    def take(self) -> ray.actor.ActorHandle:
        while True:
            with self.lock:
                host = self.idle.pop() if self.idle else None
            if host is None:
                return start_host()
            try:
                ray.get(host.__ray_ready__.remote())
                return host
            except ray.exceptions.RayActorError:
                continue

    def give_back(self, host: ray.actor.ActorHandle) -> None:
        with self.lock:
            self.idle.append(host)


def start_host() -> ray.actor.ActorHandle:
    """A host on this process's node (where Ray Train starts its controller: the driver's), owned by this process."""
    node = ray.get_runtime_context().get_node_id()
    return ray.remote(num_cpus=0, label_selector={ray._raylet.RAY_NODE_ID_KEY: node},
                      concurrency_groups=CONCURRENCY_GROUPS)(ControllerHost).remote()


HOSTS = HostPool()  # per process: a Tune actor's, across the trials it runs
