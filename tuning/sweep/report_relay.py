"""A trial's reports, from its Ray Train controller to its Tune trial, through one relay actor for the whole sweep.

Ray's TuneReportCallback relays them through a queue actor of each trial's own: a process, about 1 CPU-second,
per trial. The sweep starts one `ReportRelay` (no CPU, on the driver's node) for all its trials instead:

    Train controller: RelayReports.after_report (relay_callback.py) ── relay.put(trial, result, host) ──▶ ReportRelay
    Tune trial (run_trial): fit_reporting_to_tune ◀── relay.take(trial) ── ray.tune.report(result)

Each trial's queue holds one result, as TuneReportCallback's does: the controller's report waits until the
trial has taken the one before, so training runs at most one epoch ahead of what Tune has decided, and a
trial the scheduler stops is stopped at the result it was stopped on.

The sweep reuses its Tune actors (a process each, started once, not once per trial), and the hosts of their
trials' Train controllers (tuning/sweep/controller_host.py), so a trial's end must end its Train run: Tune hands
the actor to the next trial only once the trial's function has returned (it waits 2 s, then kills the actor
instead). A trial Tune stops is told so inside `ray.tune.report` (SystemExit); `fit_reporting_to_tune` then
aborts its run: the relay lets go of any report waiting and has the run's host (each report names it) abort the
run, which kills its workers and removes their placement group, so the next trial's workers get its CPUs at once;
a host that does not answer within abort_wait_s is killed, with it its workers, and the relay removes their
placement group (rank 0 names it as it starts). On the public trial path (tuning/sweep/trial_path.py) a report
names Ray Train's own controller actor instead, not `hosted`: the relay kills it at once (its workers end with it)
and removes the placement group, as for a host that does not answer. The sweep's driver does the same as soon as
Tune has ended a trial (`end_run`, from tuning/sweep/trial_lifecycle.py): a stopped trial's run ends before its
actor is reused, and one whose actor Tune kills leaves no placement group behind.
Only public Ray APIs: a Ray Train UserCallback on the controller (tuning/sweep/relay_callback.py),
`ray.tune.report` in the trial's thread, `ray.kill`. The relay's process imports this module alone: not
Ray Train, Ray Tune or torch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ENDED = "ended"  # what `take` returns once the trial's fit has returned and its results are all taken
ABORTED = "aborted"  # what `take` returns once the trial's run has been aborted
TAKE_WAIT_S = 30.0  # a take waits this long at most: then the trial looks itself whether fit has returned
ABORT_WAIT_S = 10.0  # a host that has not aborted a run within this is killed
FIT_END_WAIT_S = 1.0  # an aborted run's fit has returned within this (Tune gives a stopped trial 2 s to return)


class ReportRelay:
    """Results by trial id, one at a time each (an async actor: many trials put and take at once)."""

    def __init__(self, abort_wait_s: float = ABORT_WAIT_S) -> None:
        self.abort_wait_s = abort_wait_s  # a host that has not aborted a run within this is killed
        self.queues: dict[str, asyncio.Queue] = {}
        # trial id -> the actor of its Train controller, and whether that is a controller host (else Ray Train's own)
        self.hosts: dict[str, tuple[ray.actor.ActorHandle, bool]] = {}
        self.abort_events: dict[str, asyncio.Event] = {}  # trial id -> set once it is aborted (a put waiting returns)
        self.groups: dict[str, str] = {}  # trial id -> its workers' placement group (hex id)
        self.aborted: set[str] = set()
        self.ended: set[str] = set()  # aborted trials whose run has been ended, or is being

    def _queue(self, trial_id: str) -> asyncio.Queue:
        return self.queues.setdefault(trial_id, asyncio.Queue(maxsize=1))

    async def put(self, trial_id: str, result: dict[str, Any], host: ray.actor.ActorHandle,
                  hosted: bool = True) -> None:
        """Waits while the trial's previous result has not been taken, or until the trial is aborted. A result of an
        aborted trial ends the run of the host that sent it (one aborted before its first report); not awaited: that
        host waits on this put before it can abort. `hosted`: `host` is a controller host (the fast path), which
        aborts a run and stays; else Ray Train's own controller (the public path), which ends with its run."""
        if trial_id in self.aborted:
            if trial_id not in self.ended:  # its first put: later ones (the run's last, as it ends) change nothing
                self.ended.add(trial_id)
                asyncio.ensure_future(self._end_run(trial_id, host, hosted))
            return
        self.hosts[trial_id] = host, hosted
        aborted = self.abort_events.setdefault(trial_id, asyncio.Event())
        waits = [asyncio.ensure_future(self._queue(trial_id).put(result)), asyncio.ensure_future(aborted.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in pending:
            wait.cancel()

    async def end(self, trial_id: str) -> None:
        """The trial's fit has returned: after its last result, `take` returns ENDED."""
        if trial_id not in self.aborted:
            await self._queue(trial_id).put(ENDED)

    async def take(self, trial_id: str, wait_s: float) -> dict[str, Any] | str | None:
        """The trial's next result, ENDED or ABORTED; None when none comes within wait_s (0: none is there now)."""
        if trial_id in self.aborted:
            return ABORTED
        queue = self._queue(trial_id)
        if wait_s <= 0:
            return None if queue.empty() else queue.get_nowait()
        try:
            return await asyncio.wait_for(queue.get(), wait_s)
        except asyncio.TimeoutError:
            return None

    async def placed(self, trial_id: str, group: str | None) -> None:
        """The trial's workers are in placement group `group` (None: in none)."""
        if group is not None:
            self.groups[trial_id] = group

    async def close(self, trial_id: str) -> None:
        """The trial's run has ended (its controller removed its placement group)."""
        self.queues.pop(trial_id, None)
        self.hosts.pop(trial_id, None)
        self.groups.pop(trial_id, None)
        self.abort_events.pop(trial_id, None)

    async def abort(self, trial_id: str) -> None:
        """End the trial's Train run, now if its host has reported, else at its first report."""
        self.aborted.add(trial_id)
        self.abort_events.setdefault(trial_id, asyncio.Event()).set()
        queue = self.queues.pop(trial_id, None)
        while queue is not None and not queue.empty():  # a report waiting to be put goes nowhere
            queue.get_nowait()
        if queue is not None:  # a take waiting on it returns now
            queue.put_nowait(ABORTED)
        if (controller := self.hosts.pop(trial_id, None)) is not None:
            self.ended.add(trial_id)  # its run's last put, still to come, ends nothing more
            await self._end_run(trial_id, *controller)

    async def _end_run(self, trial_id: str, host: ray.actor.ActorHandle, hosted: bool) -> None:
        """End the trial's run: its host aborts it (tuning/sweep/controller_host.py: the workers and their placement
        group go, the host stays for the Tune actor's next trial). A host that has not done so within abort_wait_s,
        or Ray Train's own controller (not `hosted`), is killed (Ray ends the workers it owns with it) and, once it
        is dead, the workers' placement group removed, which would outlive them. Not before: a controller that sees
        its workers die restarts its worker group, in a new placement group no run would give back."""
        try:
            if hosted:
                await asyncio.wait_for(host.abort.remote(trial_id), self.abort_wait_s)
                self.groups.pop(trial_id, None)  # removed by the worker group's abort
                return
        except (asyncio.TimeoutError, ray.exceptions.RayError):
            pass
        ray.kill(host)
        await _dead(host)
        if (group := self.groups.pop(trial_id, None)) is not None:
            ray.util.remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group))))


async def _dead(actor: ray.actor.ActorHandle, wait_s: float = 30.0) -> None:
    """Once `actor` (killed) no longer answers; at most wait_s."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            await actor.__ray_ready__.remote()
        except ray.exceptions.RayActorError:
            return
        await asyncio.sleep(0.05)


def relay_name() -> str:
    """The relay's name in Ray: one per sweep driver (its job)."""
    return f"mamba-tune-report-relay-{ray.get_runtime_context().get_job_id()}"


def start_relay() -> ray.actor.ActorHandle:
    """The sweep's relay, on this (the driver's) node; it lives as long as the driver (a second sweep of the driver
    shares it)."""
    return ray.remote(ReportRelay).options(
        name=relay_name(), get_if_exists=True, num_cpus=0, max_concurrency=1000,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False),
    ).remote()


def end_run(trial_id: str) -> None:
    """From the sweep's driver, once Tune has ended a trial: its Train run ends now, its placement group given back.
    A trial Tune stopped runs on until its actor is reused or killed, and a killed one leaves its group behind;
    one that completed has ended its run already (this changes nothing)."""
    try:
        relay = ray.get_actor(relay_name())
    except ValueError:  # no relay in this driver (nothing of its own to end)
        return
    relay.abort.remote(trial_id)


def fit_reporting_to_tune(fit: Callable[[], Any], relay: ray.actor.ActorHandle, trial_id: str,
                          report: Callable[[dict[str, Any]], None]) -> None:
    """Run `fit` (a Ray Train trainer's) in a thread and `report` each result the relay brings, in this thread
    (Tune's, where `ray.tune.report` must be called), until fit has returned and every result is taken;
    then raise what fit raised. A run aborted from the driver (`end_run`: Tune has ended the trial) returns at
    once. Stopped (by `report` raising, as `ray.tune.report` does when Tune stops the trial), the run is aborted
    before this returns."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fit()
        except BaseException as exc:  # noqa: BLE001 - raised again in the trial's thread
            failure.append(exc)
        finally:  # wakes the trial's take at once (without it, the take's timeout tells)
            relay.end.remote(trial_id)

    thread = threading.Thread(target=run, name=f"ray-train-{trial_id}", daemon=True)
    thread.start()
    try:
        while True:
            ended = not thread.is_alive()  # before taking: a result put before fit returned is taken below
            result = ray.get(relay.take.remote(trial_id, 0.0 if ended else TAKE_WAIT_S))
            if result == ABORTED:  # Tune has ended the trial; its run's failure is that abort
                thread.join(FIT_END_WAIT_S)  # the run's host, free again, serves this actor's next trial
                return
            if result == ENDED or (result is None and ended):
                break
            if result is not None:
                report(result)
    except BaseException:  # stopped by Tune (SystemExit), or interrupted: the run must not outlive the trial
        ray.get(relay.abort.remote(trial_id))
        thread.join(FIT_END_WAIT_S)
        raise
    relay.close.remote(trial_id)
    if failure:
        raise failure[0]
