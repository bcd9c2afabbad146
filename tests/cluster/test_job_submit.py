"""Sweeps submitted through Ray's Jobs API as KubeRay's RayJob submits deploy/kuberay/rayjob.yaml: a head with no
CPU for trials (num-cpus 0), a worker node that runs them, the tracking server's URI and the sweep storage in the
job's environment (on Kubernetes, the head's, from the overlay's settings), and the entrypoint's relative paths
resolved in the folder `ray start` runs in (the image's working folder). The same entrypoint submitted twice in a
row is two sweeps, each named after its job: both succeed, print the winner's one look at the test segment, and
leave their files in the storage and their runs in MLflow."""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from tests.cli import ROOT, run_cli
from tests.cluster.ray_cluster import RayCluster, client_token_auth
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import ledger
from tuning.cli.main import build_parser
from tuning.sweep_files import LEDGER, MANIFEST

pytestmark = pytest.mark.faults
MAMBA_TUNE = Path(sys.executable).with_name("mamba-tune")  # the installed command, as in the image
# search_spaces/smoke.yaml cut to a minute on two cores: two trials, three epochs, one finalist confirmed
SHORTER = ["--set", "trials=2", "--set", "scheduler.max_epochs=3", "--set", "confirm.top_k=1"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The image's working folder in miniature: search_spaces/ beside runs/, the bars in runs/data/ (the head's
    volume), and not the folder this test runs in."""
    folder = tmp_path_factory.mktemp("workdir")
    shutil.copytree(ROOT / "search_spaces", folder / "search_spaces")
    done = run_cli("data", "synth", "--out", folder / "runs" / "data" / "bars.parquet", "--bars", "3000")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="module")
def head_without_cpus(tmp_path_factory, workdir):
    """A head that offers trials nothing (as rayStartParams num-cpus "0"), its dashboard and Jobs API on, and one
    worker node of 2 CPUs; both started in `workdir`."""
    cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"), cwd=workdir)
    with client_token_auth():
        try:
            cluster.start_head(cpus=0)
            cluster.add_node("worker", cpus=2)
            yield cluster
        finally:
            cluster.stop()


def test_job_submit_runs_each_submission_as_a_sweep_of_its_own(head_without_cpus, tracking_server, workdir, tmp_path,
                                                              monkeypatch):
    """deploy/kuberay/rayjob.yaml's entrypoint, created twice in a row: two jobs of one entrypoint, two sweeps, each
    named after its job (--name-from-ray-job), both to success, in the storage the head's environment names."""
    cluster = head_without_cpus
    entrypoint = shlex.join([str(MAMBA_TUNE), "sweep", "--data", "runs/data/bars.parquet",
                             "--space", "search_spaces/smoke.yaml", "--name-from-ray-job", *SHORTER])
    # The head's environment, as an overlay's settings give it: the tracking server, and the storage (a folder
    # here, which both local nodes see; the bucket on a cloud)
    environment = {"MLFLOW_TRACKING_URI": tracking_server.url, "MAMBA_TUNE_STORAGE": "runs/kept-sweeps"}
    monkeypatch.setenv("MAMBA_TUNE_STORAGE", environment["MAMBA_TUNE_STORAGE"])
    args = build_parser().parse_args(shlex.split(entrypoint)[1:])  # what the RayJob test asks of its entrypoint
    assert args.tracking_uri is None and args.storage == "runs/kept-sweeps" and args.name_from_ray_job
    jobs = [cluster.submit(entrypoint, runtime_env={"env_vars": environment}) for _ in range(2)]  # in a row
    client, deadline = JobSubmissionClient(cluster.dashboard), time.monotonic() + 900  # both, on two CPUs
    for job in jobs:
        while (status := client.get_job_status(job)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            assert time.monotonic() < deadline, f"job {job} still {status}: {client.get_job_logs(job)[-3000:]}"
            time.sleep(2)
        logs = client.get_job_logs(job)
        assert status == JobStatus.SUCCEEDED, logs[-4000:]
        assert f"sweep {job}: 2 trials, " in logs and "\ntest: " in logs, logs[-4000:]  # its name; its one test look

    worker = cluster.node_ids["worker"]
    used = {w["node_id"] for run in cluster.get("/api/train/v2/runs/v1")["train_runs"]
            for attempt in run["attempts"] for w in attempt["workers"]}
    assert used == {worker}, used  # no trial on the head
    for job in jobs:
        sweep = workdir / "runs" / "kept-sweeps" / job  # relative to where `ray start` ran: the job's folder
        assert (sweep / MANIFEST).is_file() and (sweep / LEDGER).is_file()
        records = ledger(sweep)
        assert sum(r["stage"] == "search" for r in records.values()) == 2
        assert all(r["stop_reason"] != "error" for r in records.values()), records
        assert_sweep_logged(tracking_server.url, job, records, tmp_path / job)  # in the server the environment named
