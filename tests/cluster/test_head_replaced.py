"""A sweep stopped as a head pod's deletion stops it, then finished on a new head whose volume is new too.

The sweep runs as a Ray job on a head that runs no trial (num-cpus 0) and a worker node, as KubeRay's RayJob runs it
on deploy/kuberay's cluster: its storage a URI that stands for the bucket (file:// here, s3:// there), its Optuna
study in PostgreSQL and its runs in an MLflow server (both outlive the head), the bars on the head's volume (runs/
of its working folder), the head's environment the manifest's stop wait (RAY_JOB_STOP_WAIT_TIME_S). Once a trial
has ended, the head pod's preStop hook, taken from the manifest, stops it and waits: the Jobs API's stop, the request
`ray job stop` and a RayJob's deletion (KubeRay's finalizer) make too: SIGTERM to the driver, SIGKILL after the stop
wait. The sweep ends interrupted, its records copied to the storage. Then the whole cluster goes and the head's
working folder with it (a new head pod on a new volume), and on a new cluster, in a new, empty working folder at the
same path (the image's WORKDIR), the bars put back, `mamba-tune resume NAME --storage URI` run as `kubectl exec` on
the head runs it (RAY_ADDRESS, which KubeRay sets in every Ray container) finishes the sweep from the storage's copy
alone: the first run's trials kept, none lost, the trial the stop cut short finished and looked at as the winner.

The worker node's MLFLOW_TRACKING_URI names no server: only the driver writes to MLflow (docs/tracking.md)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState
from ray.job_submission import JobStatus, JobSubmissionClient

from tests.cli import ROOT, free_port
from tests.cluster.ray_cluster import RayCluster, client_token_auth
from tests.deploy.pod_env import container_env
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, ledger, write_space
from tuning.sweep_files import LEDGER, MANIFEST, TEST_LOOK

pytestmark = pytest.mark.faults
MAMBA_TUNE = Path(sys.executable).with_name("mamba-tune")  # the installed command, as in the image
RAYCLUSTER = ROOT / "deploy" / "kuberay" / "base" / "raycluster.yaml"
POD_DASHBOARD = "http://127.0.0.1:8265"  # the Jobs API, as the head pod's own processes reach it
STOP_WAIT = "RAY_JOB_STOP_WAIT_TIME_S"
NAME = "moved"
# Two trials, one at a time: the first (its learning rate too small) ends at the gate at epoch 2, the second runs its
# 4 epochs; the stop comes while the second runs, so the winner is the trial the new head finishes.
INITIAL = [SPACE["initial"][1], SPACE["initial"][0]]


def head_container() -> dict:
    """The head pod's container in deploy/kuberay's RayCluster."""
    cluster = next(d for d in yaml.safe_load_all(RAYCLUSTER.read_text()) if d and d["kind"] == "RayCluster")
    (container,) = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    return container


def pre_stop_hook(dashboard: str) -> str:
    """The Python the head pod runs before it goes (its preStop hook), pointed at `dashboard` instead of the pod's."""
    code = head_container()["lifecycle"]["preStop"]["exec"]["command"][-1]
    assert POD_DASHBOARD in code, code
    return code.replace(POD_DASHBOARD, dashboard)


def start_cluster(workdir: Path, logs: Path, head_env: dict[str, str]) -> RayCluster:
    """A head of no CPU for trials, with `head_env` (its pod's secrets), and a worker node of 2 CPUs whose MLflow is
    nowhere; both started in `workdir`, the image's working folder."""
    cluster = RayCluster(logs, cwd=workdir)
    cluster.env.update(head_env)
    cluster.start_head(cpus=0, args=[agent_port()])
    cluster.env.update(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    cluster.add_node("worker", cpus=2, args=[agent_port()])
    return cluster


def agent_port() -> str:
    """A node's dashboard agent on a free port: Ray's default (52365) may be another Ray's on this machine, and a
    head whose agent cannot listen takes no job ("No available agent to submit job")."""
    return f"--dashboard-agent-listen-port={free_port()}"


def put_bars(bars: Path, workdir: Path) -> None:
    """The bars onto the head's volume, as docs/kubernetes.md puts them (kubectl cp)."""
    (workdir / "runs" / "data").mkdir(parents=True)
    shutil.copyfile(bars, workdir / "runs" / "data" / "bars.parquet")


@pytest.mark.timeout(1800)  # two clusters and a sweep in two halves, on a machine that may be busy
def test_a_stopped_job_is_finished_from_the_storage_on_a_new_head_with_a_new_volume(
        bars, tracking_server, postgres, tmp_path, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)  # for this process's look at the study
    # the user in the URL, the password from the head's environment (the secret mamba-tune-db), as in a pod
    study_url = postgres.create_database("optuna").replace("://", f"://{postgres.user}@")
    bucket = tmp_path / "bucket"
    storage = f"file://{bucket}/sweeps"
    # the head pod's environment, as the kubelet builds it from the manifest: its env (the stop wait) and its envFrom,
    # the overlay's settings (the storage, MLflow's URI) and the optional secret mamba-tune-db
    settings = {"MAMBA_TUNE_STORAGE": storage, "MLFLOW_TRACKING_URI": tracking_server.url}
    head_env = container_env(head_container(), {"mamba-tune-settings": settings},
                             {"mamba-tune-db": {"PGPASSWORD": postgres.password}})
    assert STOP_WAIT in head_env and "PGUSER" not in head_env
    copy = bucket / "sweeps" / NAME  # the records' copy in the storage
    space = write_space(tmp_path, trials=2, initial=INITIAL, resources={"max_concurrent": 1})  # the image's
    workdir = tmp_path / "workdir"  # the head's working folder; its runs/ is the head's volume
    workdir.mkdir()
    put_bars(bars, workdir)

    with client_token_auth():
        first = start_cluster(workdir, tmp_path, head_env)
        try:
            entrypoint = shlex.join([str(MAMBA_TUNE), "sweep", "--data", "runs/data/bars.parquet", "--space",
                                     str(space), "--name", NAME, "--storage", storage, "--study-url", study_url])
            job = first.submit(entrypoint)
            client, deadline = JobSubmissionClient(first.dashboard), time.monotonic() + 600
            while not (copy / LEDGER).exists() and not client.get_job_status(job).is_terminal():
                assert time.monotonic() < deadline, client.get_job_logs(job)[-3000:]
                time.sleep(0.5)
            assert client.get_job_status(job) == JobStatus.RUNNING, client.get_job_logs(job)[-3000:]

            # The head pod deleted: its preStop hook stops the job as `ray job stop` and a RayJob's deletion do (the
            # Jobs API's stop: SIGTERM, SIGKILL after the stop wait), and waits for it to end.
            hook = subprocess.run([sys.executable, "-c", pre_stop_hook(first.dashboard)], env=first.env,
                                  capture_output=True, text=True, timeout=600)
            assert hook.returncode == 0, hook.stderr[-3000:]
            assert client.get_job_status(job) == JobStatus.STOPPED
            logs = client.get_job_logs(job)
        finally:
            first.stop()  # the whole cluster goes

    # The driver ended as on Ctrl-C, not killed: its last lines say so and name the command that continues it.
    assert "\ninterrupted with " in logs, logs[-3000:]
    assert f"mamba-tune resume {NAME} --storage {storage}" in logs, logs[-3000:]
    assert "storage: " not in logs, logs[-3000:]  # every copy of the records made whole, none said to have failed
    before = ledger(copy)
    assert [r["stop_reason"] for r in before.values()] == ["gate"], before  # the first trial, and only it
    assert ledger(workdir / "runs" / "sweeps" / NAME) == before
    assert json.loads((copy / MANIFEST).read_text())["study_url"] == study_url

    shutil.rmtree(workdir)  # the head's volume is lost: of the sweep, only the storage and the servers are left
    workdir.mkdir()
    put_bars(bars, workdir)  # the same bars, put back

    with client_token_auth():
        second = start_cluster(workdir, tmp_path, head_env)
        try:
            env = {**second.env, **head_env, "RAY_ADDRESS": second.address}  # `kubectl exec` gets the pod's env
            resumed = subprocess.run([str(MAMBA_TUNE), "resume", NAME, "--storage", storage], cwd=workdir, env=env,
                                     capture_output=True, text=True, timeout=900)
        finally:
            second.stop()

    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "\ntest: " in resumed.stdout, resumed.stdout[-3000:]  # the winner's one look at the test segment
    assert "storage: " not in resumed.stdout + resumed.stderr, resumed.stderr[-3000:]
    folder = workdir / "runs" / "sweeps" / NAME
    after = ledger(folder)
    assert sorted(r["stop_reason"] for r in after.values()) == ["completed", "gate"], after
    assert all(after[trial] == record for trial, record in before.items())  # kept, not rerun
    assert ledger(copy) == after  # and the storage's copy is up to date
    (look,) = json.loads((folder / TEST_LOOK).read_text())
    (winner,) = [t for t, r in after.items() if r["stop_reason"] == "completed"]
    assert look["trial_id"] == winner and winner not in before  # the trial the stop cut short, finished here
    study = optuna.load_study(study_name=NAME, storage=study_url)
    assert sorted(t.user_attrs["ray_trial_id"] for t in study.trials) == sorted(after)  # each once, none lost
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in study.trials)
    assert {p.name for p in (copy / "train").iterdir()} == set(after)  # no trial run twice under another id
    assert_sweep_logged(tracking_server.url, NAME, after, tmp_path)  # each run once, the parent finished
