"""The sweep's report relay (tuning/sweep/report_relay.py) on a real local Ray: a trial's results reach Tune in
order, then its end; a stopped trial's Train run is aborted (its controller killed, its placement group removed)."""

from __future__ import annotations

import threading
import time

import pytest
import ray
from ray.util.placement_group import placement_group, placement_group_table

from tuning.sweep.report_relay import ABORTED, ENDED, end_run, fit_reporting_to_tune, start_relay


@pytest.fixture(scope="module")
def relay():
    """The relay of this test driver, on a local Ray (held here: Ray ends an actor no handle refers to)."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield start_relay()
    if started:
        ray.shutdown()


@ray.remote(num_cpus=0)
class Controller:
    """Stands for a trial's Ray Train controller: it reports to the relay, from its own process."""

    def report(self, relay, trial_id: str, results: list[dict]) -> None:
        me = ray.get_runtime_context().current_actor
        for result in results:
            ray.get(relay.put.remote(trial_id, result, me))

    def ping(self) -> str:
        return "pong"


def test_every_result_reaches_tune_in_order_then_fit_raises_what_it_raised(relay):
    controller = Controller.remote()
    results = [{"epoch": epoch} for epoch in range(4)]
    reported: list[dict] = []

    def fit() -> None:
        ray.get(controller.report.remote(relay, "t1", results))
        raise RuntimeError("worker failed")

    with pytest.raises(RuntimeError, match="worker failed"):
        fit_reporting_to_tune(fit, relay, "t1", reported.append)
    assert reported == results


def test_a_trial_tune_stops_has_its_run_aborted_and_its_placement_group_removed(relay):
    controller = Controller.remote()
    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    ray.get(relay.placed.remote("t2", group.id.hex()))
    release = threading.Event()

    def fit() -> None:  # the run goes on until its controller dies
        ray.get(controller.report.remote(relay, "t2", [{"epoch": 0}, {"epoch": 1}]))
        release.wait(60)

    def report(result: dict) -> None:
        if result["epoch"] == 1:
            raise SystemExit(0)  # what ray.tune.report raises when Tune stops the trial

    with pytest.raises(SystemExit):
        fit_reporting_to_tune(fit, relay, "t2", report)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(controller.ping.remote(), timeout=30)
    assert placement_group_table(group)["state"] == "REMOVED"
    release.set()


def test_a_trial_aborted_before_its_first_report_kills_the_controller_that_reports(relay):
    controller = Controller.remote()
    ray.get(relay.abort.remote("t3"))
    with pytest.raises(ray.exceptions.RayActorError):  # killed as it reports
        ray.get(controller.report.remote(relay, "t3", [{"epoch": 0}]), timeout=30)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(controller.ping.remote(), timeout=30)


def test_take_returns_the_end_after_the_last_result(relay):
    ray.get(relay.put.remote("t4", {"epoch": 0}, Controller.remote()))
    ending = relay.end.remote("t4")  # waits until the result is taken
    assert ray.get(relay.take.remote("t4", 5.0)) == {"epoch": 0}
    ray.get(ending)
    assert ray.get(relay.take.remote("t4", 5.0)) == ENDED
    assert ray.get(relay.take.remote("t4", 0.0)) is None


def test_a_run_the_driver_ends_returns_at_once_without_its_failure(relay):
    """Tune has ended the trial (ASHA stopped it): the driver's end_run kills the controller, removes the group,
    and the trial's function returns, so that Tune can hand its actor to the next trial."""
    controller = Controller.remote()
    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    ray.get(relay.placed.remote("t5", group.id.hex()))
    reported: list[dict] = []

    def fit() -> None:  # fails once its controller is killed, as a Train run does
        ray.get(controller.report.remote(relay, "t5", [{"epoch": 0}, {"epoch": 1}, {"epoch": 2}]))

    def report(result: dict) -> None:
        reported.append(result)
        if result["epoch"] == 0:
            end_run("t5")

    fit_reporting_to_tune(fit, relay, "t5", report)  # returns: no exception from the killed run
    assert [r["epoch"] for r in reported] in ([0], [0, 1])  # at most the result put before the abort
    deadline = time.monotonic() + 30  # removed once the controller is dead
    while placement_group_table(group)["state"] != "REMOVED" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert placement_group_table(group)["state"] == "REMOVED"
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(controller.ping.remote(), timeout=30)
    assert ray.get(relay.take.remote("t5", 0.0)) == ABORTED
