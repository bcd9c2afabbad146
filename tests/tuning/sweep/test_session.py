"""`mamba-tune sweep / resume / best` end to end, on a real local Ray (integration: a few minutes)."""

from __future__ import annotations

import json
import time

import optuna
import pytest
import torch
import yaml
from optuna.trial import TrialState

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.mlflow_server import free_port
from tests.tuning.sweeps import ledger, write_space

pytestmark = pytest.mark.integration


def test_sweep_stops_trials_by_asha_and_gate_and_its_best_trains_again(bars, finished_sweep, tmp_path):
    _, storage, _, done = finished_sweep
    assert f"study:   sqlite:///{storage / 't' / 'optuna.db'}" in done.stdout
    records = ledger(storage / "t")
    reasons = sorted(r["stop_reason"] for r in records.values())
    assert len(records) == 5 and "gate" in reasons and "asha" in reasons and "completed" in reasons, reasons
    gated = next(r for r in records.values() if r["stop_reason"] == "gate")
    assert (gated["params"]["learning_rate"], gated["stop_epoch"]) == (1e-7, 2)
    assert "rank trial" in done.stdout and "completed@4" in done.stdout  # the leaderboard

    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    states = {t.user_attrs["ray_trial_id"]: t.state for t in study.trials}
    assert states == {k: {"completed": TrialState.COMPLETE, "asha": TrialState.PRUNED,
                          "gate": TrialState.PRUNED}[r["stop_reason"]] for k, r in records.items()}

    exported = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert exported.returncode == 0, exported.stderr
    best = min((r for r in records.values() if r["stop_reason"] == "completed"), key=lambda r: r["best_val_loss"])
    config = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert config["train"]["lr"] == best["params"]["learning_rate"] and config["train"]["epochs"] == 4
    assert config["model"]["d_model"] == 16 and config["data"]["window"] == 16

    trained = run_cli("train", "--data", bars, "--config", tmp_path / "best.yaml", "--out", tmp_path / "prod")
    assert trained.returncode == 0, trained.stderr
    again = min(m["val_loss"] for m in json.loads((tmp_path / "prod" / "metrics.json").read_text()))
    torch.testing.assert_close(again, best["best_val_loss"], rtol=1e-3, atol=0)  # the trial, reproduced


def test_sweep_logs_every_trial_to_mlflow_as_a_nested_run(finished_sweep, tmp_path):
    _, storage, uri, done = finished_sweep
    assert f"mlflow:  experiment t in {uri}" in done.stdout
    assert_sweep_logged(uri, "t", ledger(storage / "t"), tmp_path)
    assert not (storage / "t" / "tracking").exists() and not (storage / "t" / "tracking-pending.jsonl").exists()
    assert not list((storage / "t" / "train").glob("*/best"))  # each trial's best.pt snapshots, staged and removed


def test_sweep_refuses_at_once_a_tracking_server_that_does_not_answer(bars, tmp_path):
    start = time.monotonic()
    url = f"http://127.0.0.1:{free_port()}"
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
               "--tracking-uri", url, timeout=120)
    assert_one_line_error(done, f"tracking store {url}: not reachable (")
    assert time.monotonic() - start < 30 and not (tmp_path / "sweeps" / "t").exists()  # before Ray, nothing written


@pytest.mark.parametrize(
    ("resources", "message"),
    [({"cpus_per_worker": 8}, "resources: a trial asks for 1 worker(s) of 8 CPU each, the cluster"),
     ({"gpus_per_trial": 1}, "resources: a trial asks for 1 worker(s) of 1 CPU and 1 GPU each"),
     ({"gpus_per_trial": "auto"}, "resources: a trial asks for 1 worker(s) of 1 CPU and 1 GPU each"),
     ({"workers": 64}, "resources: a trial asks for 64 worker(s)")],
)
def test_sweep_refuses_at_once_what_the_cluster_cannot_hold(bars, tmp_path, resources, message):
    start = time.monotonic()
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path, resources=resources),
               "--storage", tmp_path / "sweeps", timeout=120)
    assert_one_line_error(done, message)
    assert time.monotonic() - start < 60  # no waiting for resources that never come
    assert not (tmp_path / "sweeps" / "t" / "sweep.json").exists()  # nothing to resume: nothing started


def test_sweep_checks_the_space_before_ray_starts(bars, tmp_path):
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path, gate={"epoch": 9}), "--storage",
               tmp_path / "sweeps", timeout=60)
    assert_one_line_error(done, f"{tmp_path / 'space.yaml'}: gate.epoch 9 is beyond scheduler.max_epochs 4")
    assert not (tmp_path / "sweeps").exists()


def test_sweep_refuses_an_existing_name_and_resume_an_unknown_one(bars, tmp_path):
    folder = tmp_path / "sweeps" / "t"
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text("{}")
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps")
    assert_one_line_error(done, "a sweep named 't' already exists")
    assert (folder / "sweep.json").read_text() == "{}"
    assert_one_line_error(run_cli("resume", "nope", "--storage", tmp_path / "sweeps"), "no sweep named 'nope'")
    assert_one_line_error(run_cli("best", "nope", "--storage", tmp_path / "sweeps"), "no sweep named 'nope'")


def test_sweep_refuses_an_address_where_no_ray_answers(bars, tmp_path):
    start = time.monotonic()
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
               "--address", "127.0.0.1:1", timeout=120)
    assert_one_line_error(done, "--address 127.0.0.1:1: no Ray cluster answers there")
    assert time.monotonic() - start < 60 and not (tmp_path / "sweeps" / "t" / "sweep.json").exists()
