"""A process's controller hosts (tuning/sweep/controller_host.py) on a real local Ray, started as a sweep starts it:
Train runs one after another in one host, each with its own Result; `abort` ends the named run alone (its worker
dead, its placement group removed) and leaves the host to serve the next run."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
import ray.train
from ray.train.v2._internal.execution.controller.state import AbortedState

from tuning.search.resources import TrialPlan
from tuning.sweep import session
from tuning.sweep.controller_host import HOSTS, ControllerHost
from tuning.sweep.trial_trainer import trial_trainer

PLAN = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)


@pytest.fixture(scope="module")
def local_ray():
    session.start_ray(None, trial_path_setting="fast")
    yield
    session.ray.shutdown()


class Seen(ray.train.UserCallback):
    """On the run's controller: the process it runs in and each report, as JSON lines in `path`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        with open(self.path, "a") as out:
            out.write(json.dumps({"controller_pid": os.getpid(), **metrics[0]}) + "\n")


def reporting_loop(config: dict[str, Any]) -> None:
    """`epochs` reports, `pause_s` apart, naming the worker's process."""
    for epoch in range(config["epochs"]):
        ray.train.report({"epoch": epoch, "worker_pid": os.getpid()})
        time.sleep(config["pause_s"])


def fit(name: str, storage: Path, epochs: int, pause_s: float = 0.0) -> ray.train.Result:
    run = ray.train.RunConfig(name=name, storage_path=str(storage), callbacks=[Seen(str(storage / f"{name}.jsonl"))])
    return trial_trainer(reporting_loop, {"epochs": epochs, "pause_s": pause_s}, PLAN, run, fast=True).fit()


def seen(storage: Path, name: str) -> list[dict[str, Any]]:
    path = storage / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(check, wait_s: float = 60) -> bool:
    deadline = time.monotonic() + wait_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)
    return check()


def test_the_host_serves_run_abort_and_the_barrier_as_coroutines():
    """The host runs Ray Train's controller through its run, get_result, get_state, get_worker_group, _set_state and
    get_all_reported_checkpoints (a coroutine run): fast_hooks' ControllerHost checks them
    (tests/tuning/sweep/test_fast_hooks.py), and a Ray that changes them sends the sweep down the public path."""
    assert [name for name, kind in inspect.getmembers(ControllerHost, inspect.iscoroutinefunction)] == [
        "abort", "broadcast_from_rank_zero", "get_all_reported_checkpoints", "reset", "run",
        "set_required_ranks"]  # async: abort runs while run awaits, as in Ray Train's; the barrier's on its own loop


class StartingController:
    """A controller whose worker group is still starting: Ray Train's WorkerGroup.abort raises ValueError then."""

    def __init__(self) -> None:
        self.states, self.hooks = [], []
        self._train_run_context = type("Context", (), {"run_config": ray.train.RunConfig(name="starting")})()
        self._controller_callback_manager = type("Hooks", (), {"invoke_best_effort": self.hooks.append})()

    def get_state(self) -> Any:
        return self.states[-1] if self.states else type("Running", (), {"is_terminal": lambda _: False})()

    def get_worker_group(self) -> Any:
        def abort() -> None:
            raise ValueError("Worker group is not active. Call WorkerGroup.create() to create a new worker group.")
        return type("StartingGroup", (), {"abort": staticmethod(abort)})()

    def _set_state(self, state: Any) -> None:
        self.states.append(state)


def test_an_abort_while_the_worker_group_starts_still_aborts_the_run_and_returns():
    """An abort that raised would have the relay kill the host, which by then may serve the Tune actor's next trial."""
    async def abort_while_starting() -> tuple[StartingController, asyncio.Future]:
        host, controller = ControllerHost(), StartingController()
        host.controller, host.running = controller, asyncio.ensure_future(asyncio.sleep(60))
        await host.abort("starting")
        await asyncio.sleep(0)  # the cancellation lands
        return controller, host.running

    controller, running = asyncio.run(abort_while_starting())
    assert running.cancelled() and controller.hooks == ["before_controller_abort"]
    assert [type(state) for state in controller.states] == [AbortedState]


@pytest.mark.integration
@pytest.mark.faults  # four Train runs, one aborted: the faults tier, for time (every sweep's stopped trials abort too)
def test_runs_follow_one_another_in_one_host_and_abort_ends_the_named_one_alone(local_ray, tmp_path):
    """Three runs in one host (not this process), each with its own Result; the second aborted by name: its worker
    dead, its placement group removed, fit returned, and the host serves the third."""
    first, second = fit("first", tmp_path, epochs=2), fit("warm", tmp_path, epochs=3)
    assert (first.error, second.error) == (None, None)
    assert [r["epoch"] for r in seen(tmp_path, "first")] == [0, 1]
    assert [r["epoch"] for r in seen(tmp_path, "warm")] == [0, 1, 2]
    (host,) = HOSTS.idle  # given back after each run: the host the next run takes
    running = threading.Thread(target=fit, args=("long", tmp_path, 1000, 0.1), daemon=True)
    running.start()
    assert wait_for(lambda: len(seen(tmp_path, "long")) >= 2)
    ray.get(host.abort.remote("warm"))  # a late abort, of a run that has ended: nothing happens
    reports = len(seen(tmp_path, "long"))
    assert wait_for(lambda: len(seen(tmp_path, "long")) > reports)

    ray.get(host.abort.remote("long"), timeout=60)
    running.join(60)
    assert not running.is_alive()  # fit has returned
    worker_pid = seen(tmp_path, "long")[-1]["worker_pid"]
    assert wait_for(lambda: not psutil.pid_exists(worker_pid))
    assert wait_for(lambda: all(group["state"] == "REMOVED" for group in ray.util.placement_group_table().values()))
    after = fit("after", tmp_path, epochs=1)
    assert after.error is None
    hosts = {r["controller_pid"] for name in ("first", "warm", "long", "after") for r in seen(tmp_path, name)}
    assert len(hosts) == 1 and hosts != {os.getpid()}
    classes = {actor["ActorClassName"] for actor in ray._private.state.actors().values()}
    assert "ControllerHost" in classes and "SynchronizationActor" not in classes  # the host kept each run's barrier
    assert "_AutoscalingCoordinatorActor" not in classes  # no run of a Ray started here asked an autoscaler
