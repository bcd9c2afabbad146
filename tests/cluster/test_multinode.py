"""Sweeps on a real multi-node Ray cluster (two `ray start` nodes on this machine), submitted as Ray jobs.

The head runs the drivers; trials ask for a custom resource only the worker node has, so every
trial must run there. The storage is a folder both nodes see (one machine), the runs go to a real
`mlflow server`. Then the worker node is killed mid-sweep and a new one joins: the sweep finishes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from collections import defaultdict
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from model.checkpoint import CheckpointError, load_checkpoint
from tests.cli import ROOT, assert_one_line_error, cli_command, run_cli
from tests.cluster.conftest import SPOT_SLOT, TRIAL_SLOT
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, ledger, write_space
from tuning.sweep_files import LEDGER

pytestmark = pytest.mark.integration
RESOURCES = {"workers": 1, "cpus_per_worker": 1, "custom": {TRIAL_SLOT: 1}}


def submit(cluster, *args: str) -> tuple[JobSubmissionClient, str]:
    """`mamba-tune ARGS` as a Ray job, the way `ray job submit -- mamba-tune ...` sends it."""
    job = cluster.submit(f"cd {shlex.quote(str(ROOT))} && {shlex.join(cli_command(*args))}")
    return JobSubmissionClient(cluster.dashboard), job


def wait_for(client: JobSubmissionClient, job: str, timeout_s: float = 600) -> str:
    """Wait for the job to end; -> its logs (asserting it succeeded)."""
    deadline = time.monotonic() + timeout_s
    while (status := client.get_job_status(job)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.monotonic() < deadline, f"job {job} still {status} after {timeout_s} s"
        time.sleep(2)
    logs = client.get_job_logs(job)
    assert status == JobStatus.SUCCEEDED, logs[-4000:]
    return logs


def train_nodes(cluster) -> dict[str, set[str]]:
    """Ray Train run (= trial id) -> the nodes its workers ran on over all its attempts (the dashboard's Train state).

    An attempt that failed before its workers started lists none."""
    used: dict[str, set[str]] = defaultdict(set)
    for train_run in cluster.get("/api/train/v2/runs/v1")["train_runs"]:
        for attempt in train_run["attempts"]:
            used[train_run["name"]] |= {worker["node_id"] for worker in attempt["workers"]}
    return used


def running_past_the_first_rung(storage: Path, epochs: range, lr: float | None = None) -> str | None:
    """A trial not yet in the ledger whose newest checkpoint holds an epoch in `epochs` (and, given `lr`, that
    trains at that learning rate), or None."""
    finished = ledger(storage) if (storage / LEDGER).exists() else {}
    return next((folder.name for folder in (storage / "train").glob("*")
                 if folder.name not in finished and newest_epoch(folder) in epochs
                 and (lr is None or learning_rate(folder) == lr)), None)


def learning_rate(trial: Path) -> float | None:
    """The peak learning rate the trial trains at, from a checkpoint's last.pt (None while none can be read)."""
    for last in trial.glob("checkpoint_*/last.pt"):
        with contextlib.suppress(CheckpointError):
            return load_checkpoint(last)["train_config"]["lr"]
    return None


def newest_epoch(trial: Path) -> int | None:
    """The last epoch in the trial's checkpoints (None before its first, or while one is being written)."""
    try:
        return max((json.loads(h.read_text())[-1]["epoch"] for h in trial.glob("checkpoint_*/history.json")),
                   default=None)
    except (ValueError, IndexError, KeyError, OSError):
        return None


def test_doctor_reports_each_node_the_shared_storage_and_the_tracking_server(cluster, tracking_server, tmp_path):
    done = run_cli("doctor", "--address", cluster.address, "--storage", tmp_path / "shared",
               "--tracking-uri", tracking_server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"mamba-tune doctor: the Ray cluster at {cluster.address}"
    assert sum(", head on " in line for line in lines) == 1 and sum(", worker on " in line for line in lines) == 1
    assert any("2 CPU, 0 GPU" in line and f"2 {TRIAL_SLOT}" in line for line in lines)
    assert any(line.startswith("  ok    versions here: python ") and "ray 2." in line for line in lines)
    assert f"  ok    storage {tmp_path / 'shared'}: written and read back from node(s) " in done.stdout
    assert "seen by every node" in done.stdout
    assert f"  ok    tracking {tracking_server.url}: reachable from the driver and from node(s) " in done.stdout
    assert lines[-1] == "ready for a sweep"


def test_sweep_submitted_as_a_job_runs_every_trial_on_the_worker_node(cluster, tracking_server, bars, tmp_path):
    storage = tmp_path / "shared" / "sweeps"
    space = write_space(tmp_path, trials=4, resources=RESOURCES)
    client, job = submit(cluster, "sweep", "--data", bars, "--space", space, "--storage", storage,
                         "--tracking-uri", tracking_server.url)
    logs = wait_for(client, job)
    assert f"4 trials, 2 trial(s) at once, each 1 worker(s) of 1 CPU + 1 {TRIAL_SLOT}" in logs

    records = ledger(storage / "t")
    assert len(records) == 4 and all(r["stop_reason"] != "error" for r in records.values())
    worker = cluster.node_id(TRIAL_SLOT)
    used = train_nodes(cluster)
    assert all(used[trial] == {worker} for trial in records), (worker, used)
    for trial in records:  # the checkpoints are in the shared storage, each with its history
        assert [p.name for p in (storage / "t" / "train" / trial).glob("checkpoint_*/history.json")]
    assert_sweep_logged(tracking_server.url, "t", records, tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a node in a mount namespace: needs root (CI runs as root)")
def test_a_folder_one_node_cannot_see_is_refused_as_storage(cluster, bars, tmp_path):
    local = tmp_path / "node-local"
    local.mkdir()
    cluster.add_node("blind", cpus=1, hidden=local)  # this node sees `local` as an empty tmpfs of its own
    try:
        done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path, resources=RESOURCES),
                   "--storage", local, "--address", cluster.address, timeout=300)
        assert_one_line_error(done, f"--storage {local}: a folder not every node sees: 1 of the cluster's 3 nodes "
                                    "cannot see it (")
        assert list(local.iterdir()) == []  # nothing written
        doctor = run_cli("doctor", "--address", cluster.address, "--storage", local, timeout=300)
        assert doctor.returncode == 1 and f"  FAIL  storage {local}: a folder not every node sees" in doctor.stdout
    finally:
        cluster.kill_node("blind")


def test_a_sweep_survives_the_loss_of_its_worker_node(cluster, tracking_server, bars, tmp_path):
    storage = tmp_path / "shared" / "sweeps"
    # One trial at a time, so the order is fixed: the first (an initial point the gate stops at epoch 2) is in
    # the ledger before the second (the initial point that passes the gate and the rung) starts. That one is
    # caught at epochs 3-5 of 16 (one ASHA rung, at epoch 2): 11 epochs or more are left, seconds of training,
    # where the kill takes milliseconds after the catch. (Caught by its learning rate: a trial the gate or ASHA
    # stopped at epoch 2 may write a checkpoint or two past it before it is killed, and look like one training.)
    gated, learns = SPACE["initial"][1], SPACE["initial"][0]
    space = write_space(tmp_path, trials=4, initial=[gated, learns],
                        resources={**RESOURCES, "max_concurrent": 1},
                        scheduler={"max_epochs": 16, "grace_period": 2, "reduction_factor": 8})
    client, job = submit(cluster, "sweep", "--data", bars, "--space", space, "--storage", storage, "--name", "k",
                         "--tracking-uri", tracking_server.url)
    deadline = time.monotonic() + 600
    while not (interrupted := running_past_the_first_rung(storage / "k", range(3, 6), learns["learning_rate"])):
        status = client.get_job_status(job)
        assert time.monotonic() < deadline and status in {JobStatus.PENDING, JobStatus.RUNNING}, client.get_job_logs(job)
        time.sleep(0.2)
    lost = cluster.node_id(TRIAL_SLOT)
    before = ledger(storage / "k")
    cluster.kill_node("worker-a")  # mid-sweep: the trial running there loses its worker
    assert client.get_job_status(job) == JobStatus.RUNNING
    assert [(r["params"]["learning_rate"], r["stop_reason"]) for r in before.values()] == [
        (gated["learning_rate"], "gate")]  # the first trial had ended
    cluster.add_node("worker-b", cpus=2, resources={TRIAL_SLOT: 2})
    wait_for(client, job)

    after = ledger(storage / "k")
    assert len(after) == 4 and all(after[k] == record for k, record in before.items())  # none lost, none rerun
    assert all(r["stop_reason"] != "error" for r in after.values()), after
    assert after[interrupted]["stop_reason"] == "completed" and after[interrupted]["stop_epoch"] == 16, after
    replacement = cluster.node_id(TRIAL_SLOT)
    used = train_nodes(cluster)
    assert interrupted not in before and {lost, replacement} <= used[interrupted], (lost, replacement, used)
    assert_sweep_logged(tracking_server.url, "k", after, tmp_path)


def test_a_preempted_node_costs_its_trials_none_of_their_failure_budget(cluster, tracking_server, bars, tmp_path):
    """max_failures 0: a lost node would end its trials as errors; a preempted one (Ray told of it first, as
    the autoscaler is of a spot reclaim) resumes them from their checkpoints on another node."""
    storage = tmp_path / "shared" / "sweeps"
    cluster.add_node("spot-a", cpus=2, resources={SPOT_SLOT: 2})  # its own resource: its trials run there only
    # One trial, the first initial point, which passes the gate and the rung at epoch 2 (a trial the gate stops
    # may write a checkpoint or two past it before it is killed, and would look like one still training).
    space = write_space(tmp_path, trials=1, initial=SPACE["initial"][:1],
                        resources={**RESOURCES, "custom": {SPOT_SLOT: 1}, "max_failures": 0},
                        scheduler={"max_epochs": 16, "grace_period": 2, "reduction_factor": 8})  # as above
    client, job = submit(cluster, "sweep", "--data", bars, "--space", space, "--storage", storage, "--name", "p",
                         "--tracking-uri", tracking_server.url)
    deadline = time.monotonic() + 600
    while not (interrupted := running_past_the_first_rung(storage / "p", range(3, 6))):
        status = client.get_job_status(job)
        assert time.monotonic() < deadline and status in {JobStatus.PENDING, JobStatus.RUNNING}, client.get_job_logs(job)
        time.sleep(0.2)
    preempted = cluster.node_ids["spot-a"]
    cluster.preempt_node("spot-a")  # milliseconds after the catch: 11 epochs or more are left
    assert client.get_job_status(job) == JobStatus.RUNNING
    cluster.add_node("spot-b", cpus=2, resources={SPOT_SLOT: 2})  # the capacity the autoscaler brings back
    wait_for(client, job)

    after = ledger(storage / "p")
    assert list(after) == [interrupted] and after[interrupted]["stop_reason"] == "completed", after
    assert after[interrupted]["stop_epoch"] == 16
    used = train_nodes(cluster)
    assert {preempted, cluster.node_ids["spot-b"]} <= used[interrupted], used
    assert_sweep_logged(tracking_server.url, "p", after, tmp_path)
