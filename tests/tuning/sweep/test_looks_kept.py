"""The look at the test segment is kept before anything else the sweep's end does (tuning/sweep/looks_kept.py):
in MLflow and in the storage's copy of the records, whatever fails next; and every `resume` leaves MLflow with
each look test.json holds, test_looks their count.

Each test works on a copy of the session's finished sweep (tests/conftest.py); the first drives the sweep's end
in this process, its search and confirmation already done, with a URI storage (file://) as on a cluster.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
import torch

from tests.cli import run_cli
from tests.tuning.sweeps import copy_sweep, sweep_run
from tuning.search.resources import TrialPlan
from tuning.sweep import session
from tuning.sweep.manifest import read_manifest
from tuning.sweep_files import MANIFEST, TEST_LOOK, SweepPaths
from tuning.tracking.store import open_store, resolve_store

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # a sweep's end that fails; a store that lacks a look


def looks_in_mlflow(uri: str) -> dict[int, float]:
    """The sweep run's looks as MLflow holds them: {step: test_looks}."""
    run = sweep_run(uri)
    return {m.step: m.value for m in mlflow.MlflowClient(uri).get_metric_history(run.info.run_id, "test_looks")}


def test_a_sweeps_end_that_fails_after_its_look_leaves_it_in_mlflow_and_in_the_storage_copy(finished_sweep,
                                                                                            tmp_path, monkeypatch):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    # A fresh MLflow store: the copy's already holds the look (step 0, the same test_loss), which only the sweep's
    # end under test may log here.
    Path(uri.removeprefix("sqlite:///")).unlink()
    assert mlflow.MlflowClient(uri).get_experiment_by_name("t") is None
    folder, bucket = storage / "t", tmp_path / "bucket"
    (look,) = json.loads((folder / TEST_LOOK).read_text())
    (folder / TEST_LOOK).unlink()  # the look not yet taken: the sweep's end takes it
    shutil.copytree(folder / "train", bucket / "t" / "train")  # a URI storage holds the checkpoints
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "ray_storage": f"file://{bucket}"}))
    paths, space, data = session.load_for_resume(SweepPaths("t", folder, f"file://{bucket}"),
                                                 read_manifest(SweepPaths("t", folder, f"file://{bucket}")))
    store = resolve_store(uri)
    tracking = session.open_tracking(store, open_store(store), paths, read_manifest(paths), space, data,
                                     TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1))
    # The search and the confirmation done (the copy's ledger holds them); what follows the look fails.
    monkeypatch.setattr(session, "_trial_setup", lambda *args: None)
    monkeypatch.setattr(session, "_search", lambda *args: True)
    monkeypatch.setattr(session, "end_lost_trials", lambda *args: None)
    monkeypatch.setattr(session, "run_confirmation", lambda *args: None)
    monkeypatch.setattr(session, "confirmation_runs", lambda *args: [])

    def disk_gone(*args):
        assert (folder / TEST_LOOK).exists()  # the look was taken first
        raise OSError("the disk is gone")

    monkeypatch.setattr(session, "_remove_snapshots", disk_gone)
    try:
        with pytest.raises(OSError, match="the disk is gone"):
            session.run(paths, space, data, 5, None, tracking, resume=True)
    finally:
        tracking.log.close(timeout_s=5)  # the sweep's end never closed it

    (taken,) = json.loads((folder / TEST_LOOK).read_text())
    torch.testing.assert_close(taken["test_loss"], look["test_loss"])  # the same best.pt, scored the same
    assert json.loads((bucket / "t" / TEST_LOOK).read_text()) == [taken]  # in the storage's copy
    assert looks_in_mlflow(uri) == {0: 1.0}  # and in MLflow
    run = sweep_run(uri)
    assert run.data.tags["mamba_tune.test_look"] == "done"
    torch.testing.assert_close(run.data.metrics["test_loss_mse_log"], taken["test_loss"])


def test_resume_logs_each_look_mlflow_lacks_and_counts_them_all(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    (look,) = json.loads((storage / "t" / TEST_LOOK).read_text())
    assert looks_in_mlflow(uri) == {0: 1.0}
    # A second look that MLflow never got (its driver killed between test.json and MLflow, or the store down
    # and its spool lost): test.json is the record, MLflow follows it.
    again = {**look, "look": 2, "trials": 6, "test_loss": look["test_loss"] * 1.5}
    (storage / "t" / TEST_LOOK).write_text(json.dumps([look, again]))

    done = run_cli("resume", "t", "--storage", storage)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "nothing to resume" in done.stdout  # no trial, no look taken: only MLflow brought up to date
    assert looks_in_mlflow(uri) == {0: 1.0, 1: 2.0}  # each look once, at its own step
    run = sweep_run(uri)
    assert run.data.metrics["test_looks"] == 2  # test.json's count
    torch.testing.assert_close(run.data.metrics["test_loss_mse_log"], again["test_loss"])  # the newest look

    twice = run_cli("resume", "t", "--storage", storage)
    assert twice.returncode == 0, twice.stderr[-3000:]
    assert looks_in_mlflow(uri) == {0: 1.0, 1: 2.0}  # a repeat logs nothing again
