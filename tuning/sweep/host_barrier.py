"""A trial's synchronization barrier, kept by its controller host instead of a process of its own per run.

Ray Train starts a SynchronizationActor for each run's worker group: the barrier its workers meet at in every
`ray.train.report` (rank 0's checkpoint folder, broadcast) and in `ray.train.collective`. It is one more process per
trial, about 1 CPU-s here to start, started on the way from a trial's start to its first report. A controller host
(tuning/sweep/controller_host.py) keeps the barrier instead: Ray Train's own class, a fresh one for each run, its
methods served by the host on an event loop of their own (the `barrier` concurrency group). A worker waiting there
never waits on the controller's loop, and the controller's blocking call to it during a preemption
(`set_required_ranks`) is not a call to its own loop.

This rests on two module globals of Ray Train, replaced in a host's process only: `worker_group.SynchronizationActor`,
which `WorkerGroup._start_impl` starts for each run, and `state._shutdown_sync_actor`, which kills it with the
worker group (checked against the Ray installed: tuning/sweep/fast_hooks.py, HostBarrier).
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from ray.train.v2._internal.execution.checkpoint.sync_actor import SynchronizationActor
from ray.train.v2._internal.execution.worker_group import state as group_state
from ray.train.v2._internal.execution.worker_group import worker_group as group_module

BARRIER_GROUP = "barrier"
CONCURRENCY_GROUPS = {BARRIER_GROUP: 1000}  # a run's workers, all waiting at once, and the controller's calls
Barrier = SynchronizationActor.__ray_actor_class__  # Ray Train's barrier, as a plain class
RAY_SHUTDOWN_SYNC_ACTOR = group_state._shutdown_sync_actor


class HostBarrier:
    """Mixed into the host: the barrier of its run in progress, and the methods of a SynchronizationActor that Ray
    Train's workers and controller call, on the host's `barrier` loop."""

    barrier: Any = None  # a Barrier, from the run's worker group start to its shutdown
    barrier_loop: asyncio.AbstractEventLoop | None = None

    @ray.method(concurrency_group=BARRIER_GROUP)
    async def broadcast_from_rank_zero(self, *args: Any, **kwargs: Any) -> Any:
        return await self._barrier().broadcast_from_rank_zero(*args, **kwargs)

    @ray.method(concurrency_group=BARRIER_GROUP)
    async def set_required_ranks(self, *args: Any, **kwargs: Any) -> bool:
        return await self._barrier().set_required_ranks(*args, **kwargs)

    @ray.method(concurrency_group=BARRIER_GROUP)
    async def reset(self) -> None:
        await self._barrier().reset()

    def _barrier(self) -> Any:
        self.barrier_loop = asyncio.get_running_loop()
        if self.barrier is None:
            raise RuntimeError("no Train run of this host has a worker group")
        return self.barrier

    def end_barrier(self) -> None:
        """The run's worker group is shut down: workers of it still waiting at its barrier are let go."""
        barrier, self.barrier = self.barrier, None
        if barrier is not None and self.barrier_loop is not None and not self.barrier_loop.is_closed():
            asyncio.run_coroutine_threadsafe(barrier.reset(), self.barrier_loop)


class _StartBarrier:
    """Stands for SynchronizationActor in Ray Train's worker group module: `.options(...).remote(**kwargs)` gives
    the host a fresh barrier for the run whose worker group starts, and hands out the host's own handle for it."""

    def __init__(self, host: HostBarrier) -> None:
        self.host = host

    def options(self, **_: Any) -> _StartBarrier:  # on the driver's node, as Ray Train asks: the host is there
        return self

    def remote(self, **kwargs: Any) -> ray.actor.ActorHandle:
        self.host.barrier = Barrier(**kwargs)
        return ray.get_runtime_context().current_actor


def serve_barriers(host: HostBarrier) -> None:
    """From now on, in this process (a host's), each worker group's barrier is `host`'s."""

    def shutdown(sync_actor: ray.actor.ActorHandle) -> None:
        if sync_actor._actor_id == ray.get_runtime_context().current_actor._actor_id:
            host.end_barrier()
        else:
            RAY_SHUTDOWN_SYNC_ACTOR(sync_actor)

    group_module.SynchronizationActor = _StartBarrier(host)
    group_state._shutdown_sync_actor = shutdown
