"""The sweep's report relay (tuning/sweep/report_relay.py) on a real local Ray: a trial's results reach Tune in
order, then its end; a stopped trial's Train run is aborted (on the fast path by the host of its controller, or with
the host killed when it does not answer; on the public path with Ray Train's own controller killed; a killed one's
placement group then removed)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

from tuning.sweep.report_relay import ABORTED, ENDED, ReportRelay, end_run, fit_reporting_to_tune, start_relay


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
class Witness:
    """What a host was asked to abort, kept where a killed host's record is not lost."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def saw(self, name: str) -> None:
        self.asked.append(name)

    def aborts(self) -> list[str]:
        return self.asked


@ray.remote(num_cpus=0)
class Host:
    """Stands for the host of a trial's Ray Train controller (tuning/sweep/controller_host.py): it reports to the
    relay from its own process, blocking its event loop while a report waits, as Ray Train's report callbacks do;
    `abort` aborts a run by name (or, for a host that does not answer, never returns), telling `witness` first."""

    def __init__(self, answers: bool = True, witness: ray.actor.ActorHandle | None = None) -> None:
        self.answers, self.aborted, self.witness = answers, [], witness

    async def report(self, relay, trial_id: str, results: list[dict]) -> None:
        me = ray.get_runtime_context().current_actor
        for result in results:
            ray.get(relay.put.remote(trial_id, result, me))

    async def abort(self, name: str) -> None:
        if self.witness is not None:
            await self.witness.saw.remote(name)
        while not self.answers:
            await asyncio.sleep(1)
        self.aborted.append(name)

    def aborted_runs(self) -> list[str]:
        return self.aborted


def eventually(check, wait_s: float = 30) -> bool:
    deadline = time.monotonic() + wait_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)
    return check()


def test_every_result_reaches_tune_in_order_then_fit_raises_what_it_raised(relay):
    host = Host.remote()
    results = [{"epoch": epoch} for epoch in range(4)]
    reported: list[dict] = []

    def fit() -> None:
        ray.get(host.report.remote(relay, "t1", results))
        raise RuntimeError("worker failed")

    with pytest.raises(RuntimeError, match="worker failed"):
        fit_reporting_to_tune(fit, relay, "t1", reported.append)
    assert reported == results


def test_a_trial_tune_stops_has_its_run_aborted_by_its_host_which_lives_on(relay):
    host = Host.remote()
    release = threading.Event()

    def fit() -> None:  # the run goes on until its host aborts it
        ray.get(host.report.remote(relay, "t2", [{"epoch": 0}, {"epoch": 1}, {"epoch": 2}]))
        release.wait(60)

    def report(result: dict) -> None:
        if result["epoch"] == 1:
            raise SystemExit(0)  # what ray.tune.report raises when Tune stops the trial

    with pytest.raises(SystemExit):
        fit_reporting_to_tune(fit, relay, "t2", report)
    assert ray.get(host.aborted_runs.remote(), timeout=30) == ["t2"]  # the report waiting was let go
    release.set()


def test_a_host_that_does_not_abort_is_killed_and_the_runs_placement_group_removed():
    relay = ray.remote(ReportRelay).options(max_concurrency=1000).remote(abort_wait_s=1.0)
    host = Host.remote(answers=False)
    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    ray.get(relay.placed.remote("t6", group.id.hex()))
    ray.get(relay.put.remote("t6", {"epoch": 0}, host))
    ray.get(relay.abort.remote("t6"), timeout=60)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(host.aborted_runs.remote(), timeout=30)
    assert placement_group_table(group)["state"] == "REMOVED"


def group_placed(relay, trial_id: str):
    """A placement group of one CPU, ready, that the relay holds as the trial's workers'."""
    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    ray.get(relay.placed.remote(trial_id, group.id.hex()))
    return group


@pytest.mark.parametrize("hosted", [True, False], ids=["fast", "public"])
def test_a_stopped_trials_run_ends_by_its_hosts_abort_or_with_ray_trains_own_controller_killed(relay, hosted):
    """The fast path's controller host aborts the run (its worker group removes the placement group) and serves the
    next trial; on the public path the controller is Ray Train's own, one per run: the relay kills it, without
    asking it to abort, and removes its workers' placement group."""
    trial_id = f"t7-{'fast' if hosted else 'public'}"
    witness = Witness.remote()
    host = Host.remote(witness=witness)
    group = group_placed(relay, trial_id)
    ray.get(relay.put.remote(trial_id, {"epoch": 0}, host, hosted))
    ray.get(relay.abort.remote(trial_id), timeout=60)
    if hosted:
        assert ray.get(host.aborted_runs.remote(), timeout=30) == [trial_id]  # asked, and alive
        assert placement_group_table(group)["state"] == "CREATED"  # the host's abort removes it, not the relay
        remove_placement_group(group)
    else:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(host.aborted_runs.remote(), timeout=30)
        assert placement_group_table(group)["state"] == "REMOVED"
    assert ray.get(witness.aborts.remote(), timeout=30) == ([trial_id] if hosted else [])


def test_a_public_trial_aborted_before_its_first_report_has_the_controller_that_reports_killed(relay):
    witness = Witness.remote()
    host = Host.remote(witness=witness)
    ray.get(relay.abort.remote("t8"))
    ray.get(relay.put.remote("t8", {"epoch": 0}, host, False), timeout=30)  # returns at once

    def dead() -> bool:
        try:
            ray.get(host.aborted_runs.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return True
        return False

    assert eventually(dead)
    assert ray.get(witness.aborts.remote(), timeout=30) == []


def test_a_trial_aborted_before_its_first_report_has_the_host_that_reports_abort_it(relay):
    host = Host.remote()
    ray.get(relay.abort.remote("t3"))
    ray.get(host.report.remote(relay, "t3", [{"epoch": 0}, {"epoch": 1}]), timeout=30)  # each put returns at once
    assert eventually(lambda: ray.get(host.aborted_runs.remote(), timeout=30) == ["t3"])


def test_take_returns_the_end_after_the_last_result(relay):
    ray.get(relay.put.remote("t4", {"epoch": 0}, Host.remote()))
    ending = relay.end.remote("t4")  # waits until the result is taken
    assert ray.get(relay.take.remote("t4", 5.0)) == {"epoch": 0}
    ray.get(ending)
    assert ray.get(relay.take.remote("t4", 5.0)) == ENDED
    assert ray.get(relay.take.remote("t4", 0.0)) is None


def test_a_run_the_driver_ends_returns_at_once_without_its_failure(relay):
    """Tune has ended the trial (ASHA stopped it): the driver's end_run has the run's host abort it, and the trial's
    function returns, so that Tune can hand its actor to the next trial."""
    host = Host.remote()
    reported: list[dict] = []

    def fit() -> None:  # a run the relay has let go ends (its host has aborted it)
        ray.get(host.report.remote(relay, "t5", [{"epoch": 0}, {"epoch": 1}, {"epoch": 2}]))

    def report(result: dict) -> None:
        reported.append(result)
        if result["epoch"] == 0:
            end_run("t5")

    fit_reporting_to_tune(fit, relay, "t5", report)  # returns: no exception from the aborted run
    assert [r["epoch"] for r in reported] in ([0], [0, 1])  # at most the result put before the abort
    assert eventually(lambda: ray.get(host.aborted_runs.remote(), timeout=30) == ["t5"])
    assert ray.get(relay.take.remote("t5", 0.0)) == ABORTED
