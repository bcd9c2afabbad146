"""Sweeps submitted through Ray's Jobs API as KubeRay's RayJob submits deploy/kuberay/rayjob.yaml: a head with no
CPU for trials (num-cpus 0), a worker node that runs them, the tracking server's URI and the sweep storage in the
head's environment (as a pod's envFrom gives it, from the overlay's settings), and the entrypoint's relative paths
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
from ray.job_submission import JobStatus

from tests.cli import ROOT, run_cli
from tests.cluster.ray_cluster import RayCluster, running, wait_for_job
from tests.deploy.kuberay_manifests import container, documents
from tests.deploy.pod_env import container_env
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


STORAGE = "runs/kept-sweeps"  # the overlay's MAMBA_TUNE_STORAGE: a folder here, which both nodes see; a bucket there


@pytest.fixture(scope="module")
def head_without_cpus(tmp_path_factory, workdir, tracking_server):
    """A head that offers trials nothing (as rayStartParams num-cpus "0"), its dashboard and Jobs API on, and one
    worker node of 2 CPUs; both started in `workdir`, with the environment the head container has in a pod: its env
    and its envFrom, the overlay's settings (the storage, the tracking server) among them."""
    head = container(documents("base/raycluster.yaml")["RayCluster"]["spec"]["headGroupSpec"])
    settings = {"MAMBA_TUNE_STORAGE": STORAGE, "MLFLOW_TRACKING_URI": tracking_server.url}
    cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"), cwd=workdir)
    cluster.env.update(container_env(head, {"mamba-tune-settings": settings}))
    with running(cluster, head_cpus=0, worker="worker", worker_cpus=2):
        yield cluster


def test_job_submit_runs_each_submission_as_a_sweep_of_its_own(head_without_cpus, tracking_server, workdir, tmp_path,
                                                              monkeypatch):
    """deploy/kuberay/rayjob.yaml's entrypoint, created twice in a row: two jobs of one entrypoint, two sweeps, each
    named after its job (--name-from-ray-job), both to success, in the storage the head's environment names."""
    cluster = head_without_cpus
    entrypoint = shlex.join([str(MAMBA_TUNE), "sweep", "--data", "runs/data/bars.parquet",
                             "--space", "search_spaces/smoke.yaml", "--name-from-ray-job", *SHORTER])
    assert cluster.env["MAMBA_TUNE_STORAGE"] == STORAGE  # in the head's environment, not the job's
    monkeypatch.setenv("MAMBA_TUNE_STORAGE", STORAGE)
    args = build_parser().parse_args(shlex.split(entrypoint)[1:])  # what the RayJob test asks of its entrypoint
    assert args.tracking_uri is None and args.storage == STORAGE and args.name_from_ray_job
    jobs = [cluster.submit(entrypoint) for _ in range(2)]  # in a row, nothing in their runtime_env
    deadline = time.monotonic() + 900  # both, on two CPUs
    for job in jobs:
        status, logs = wait_for_job(cluster.dashboard, job, deadline)
        assert status == JobStatus.SUCCEEDED, logs[-4000:]
        assert f"sweep {job}: 2 trials, " in logs and "\ntest: " in logs, logs[-4000:]  # its name; its one test look

    worker = cluster.node_ids["worker"]
    used = {w["node_id"] for run in cluster.get("/api/train/v2/runs/v1")["train_runs"]
            for attempt in run["attempts"] for w in attempt["workers"]}
    assert used == {worker}, used  # no trial on the head
    for job in jobs:
        sweep = workdir / STORAGE / job  # relative to where `ray start` ran: the job's folder
        assert (sweep / MANIFEST).is_file() and (sweep / LEDGER).is_file()
        records = ledger(sweep)
        assert sum(r["stage"] == "search" for r in records.values()) == 2
        assert all(r["stop_reason"] != "error" for r in records.values()), records
        assert_sweep_logged(tracking_server.url, job, records, tmp_path / job)  # in the server the environment named
