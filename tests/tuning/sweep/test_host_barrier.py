"""A trial's synchronization barrier kept by its controller host (tuning/sweep/host_barrier.py).

The host stands in for Ray Train's SynchronizationActor through two module globals and the methods Ray Train calls on
it: these tests fail loudly when a Ray release changes any of them, before a sweep's workers would call a method the
host does not have, or a run would start (or kill) a barrier the host does not know of.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path

import pytest
import ray.train.v2
from ray.train.v2._internal.execution.checkpoint.sync_actor import SynchronizationBarrierResetError
from ray.train.v2._internal.execution.worker_group import WorkerGroup
from ray.train.v2._internal.execution.worker_group import state as group_state
from ray.train.v2._internal.execution.worker_group import worker_group as group_module

from tuning.sweep.controller_host import ControllerHost
from tuning.sweep.host_barrier import BARRIER_GROUP, RAY_SHUTDOWN_SYNC_ACTOR, Barrier, HostBarrier

TRAIN = Path(ray.train.v2.__file__).parent


def test_ray_train_starts_and_kills_a_barrier_per_worker_group_through_the_globals_the_host_replaces():
    start = inspect.getsource(WorkerGroup._start_impl)
    assert "SynchronizationActor.options(" in start and "timeout_s=" in start and "warn_interval_s=" in start
    assert group_module.SynchronizationActor.__ray_actor_class__ is Barrier
    assert "_shutdown_sync_actor(self.sync_actor)" in inspect.getsource(group_state.WorkerGroupState.shutdown)
    assert "_shutdown_sync_actor(self.sync_actor)" in inspect.getsource(group_state.WorkerGroupStateBuilder.shutdown)
    assert RAY_SHUTDOWN_SYNC_ACTOR.__module__ == group_state.__name__
    assert set(inspect.signature(Barrier.__init__).parameters) >= {"timeout_s", "warn_interval_s"}


def test_every_barrier_method_ray_train_calls_is_one_the_host_serves_on_its_barrier_loop():
    called = {name for path in TRAIN.rglob("*.py") for name in re.findall(r"sync_actor\.(\w+)\.remote", path.read_text())}
    assert called == {"broadcast_from_rank_zero", "set_required_ranks", "reset"}
    for name in called:
        assert inspect.signature(getattr(HostBarrier, name)).parameters.keys() >= {"self"}
        assert getattr(ControllerHost, name).__ray_concurrency_group__ == BARRIER_GROUP
        assert inspect.iscoroutinefunction(getattr(Barrier, name))


def test_a_barrier_releases_its_ranks_with_rank_zeros_data_and_a_shut_down_one_lets_its_waiters_go():
    async def scenario() -> tuple[list[str], BaseException]:
        host = HostBarrier()
        host.barrier = Barrier(timeout_s=None, warn_interval_s=60)
        both = await asyncio.gather(host.broadcast_from_rank_zero(1, 2, "one's", "report"),
                                    host.broadcast_from_rank_zero(0, 2, "zero's", "report"))
        waiting = asyncio.ensure_future(host.broadcast_from_rank_zero(0, 2, "alone", "report"))
        await asyncio.sleep(0.05)
        host.end_barrier()  # the worker group is shut down while rank 0 waits for rank 1
        error = await asyncio.wait_for(asyncio.gather(waiting, return_exceptions=True), 5)
        return both, error[0]

    both, error = asyncio.run(scenario())
    assert both == ["zero's", "zero's"]
    assert isinstance(error, SynchronizationBarrierResetError)


def test_a_barrier_call_with_no_run_in_the_host_is_refused():
    with pytest.raises(RuntimeError, match="no Train run"):
        asyncio.run(HostBarrier().reset())
