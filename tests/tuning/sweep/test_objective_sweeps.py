"""A sweep per objective (data.objective: mse_log, mse_var, qlike) end to end on real daily bars (the S&P 500's, as
`mamba-tune data sp500` writes them), run through the CLI as a user runs it: the sweep's records and MLflow carry
the objective, its losses are in the objective's units, and `resume --trials N` keeps it.

Kept small (the faults tier's time is tight): one bars file for the module, per objective one sweep of 2 trials of
at most 4 epochs without confirmation runs, and one resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow import MlflowClient

from model.data import DataConfig, load_dataset
from model.objectives import mean_loss
from tests.cli import ROOT, run_cli
from tuning.search.gate_verdict import NO_WINNER_EXIT
from tuning.sweep_files import LEDGER, MANIFEST, read_test_looks
from tuning.tracking.objective import title

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # real sweeps, Ray and MLflow: the longer tier

OBJECTIVES = ("mse_log", "mse_var", "qlike")
SMOKE = ROOT / "search_spaces" / "smoke.yaml"
# The smoke space cut to the least that shows the objective everywhere: 2 trials (its initial point, then TPE's),
# 4 epochs (the gate at epoch 2 still decides), no confirmation runs (the winner is the best completed trial).
SMALL = ("--set", "scheduler.max_epochs=4", "--set", "confirm=null")
OBJECTIVE_TAG = "mamba_tune.objective"


@pytest.fixture(scope="module")
def sp500(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bars") / "sp500.parquet"
    done = run_cli("data", "sp500", "--out", path)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def sweeps(sp500, tmp_path_factory):
    """objective -> (its folder, storage, tracking URI, the finished `mamba-tune sweep`), each swept once."""
    done: dict[str, tuple] = {}

    def swept(objective: str) -> tuple:
        if objective not in done:
            folder = tmp_path_factory.mktemp(objective)
            storage, uri = folder / "sweeps", f"sqlite:///{folder / 'mlflow.db'}"
            process = run_cli("sweep", "--data", sp500, "--space", SMOKE, "--storage", storage, "--tracking-uri", uri,
                              "--trials", "2", *SMALL, "--set", f"data.objective={objective}")
            done[objective] = folder, storage, uri, process
        return done[objective]

    return swept


def assert_ended_as_stated(process) -> None:
    """Exit 0 with a winner, or the documented exit of a sweep no trial of which passed the gate, with that said
    (daily stock bars may do that): never a crash."""
    assert process.returncode in (0, NO_WINNER_EXIT), (process.returncode, process.stderr[-3000:])
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    if process.returncode == 0:
        assert "best: trial " in process.stdout, process.stdout[-2000:]
    else:
        assert "no configuration passed the gate" in process.stdout or \
            "no configuration beat HAR" in process.stdout, process.stdout[-2000:]


def sweep_runs(uri: str) -> tuple:
    """The sweep's parent run and its trial runs {trial_id: run} in the MLflow store at `uri`."""
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("smoke").experiment_id], max_results=100)
    (parent,) = [r for r in runs if r.data.tags.get("mamba_tune.role") == "sweep"]
    return parent, {r.data.tags["trial_id"]: r for r in runs if r.data.tags.get("mamba_tune.role") == "trial"}


def dataset(sp500: Path, objective: str):
    """The sweep's data, built here as the smoke space builds it, under `objective`."""
    return load_dataset(sp500, DataConfig(window=32, horizon=6, objective=objective))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_sweep_ranks_and_records_by_its_objective(objective, sweeps, sp500):
    _, storage, uri, process = sweeps(objective)
    assert_ended_as_stated(process)
    baselines = next(line for line in process.stdout.splitlines() if line.startswith("baselines"))
    assert objective in baselines or title(objective) in baselines, baselines

    folder = storage / "smoke"
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["space"]["data"]["objective"] == objective  # kept as run: `resume` reads it back
    records = {r["trial_id"]: r for r in json.loads((folder / LEDGER).read_text())}
    assert len(records) == 2

    # In the objective's units: HAR's validation loss the sweep recorded is the objective's mean loss of HAR, as
    # the data built here under the objective give it; every loss is finite and not negative (each objective's is).
    data = dataset(sp500, objective)
    for record in records.values():
        torch.testing.assert_close(record["baseline_har"], data.baselines["har"], rtol=1e-6, atol=0)
        torch.testing.assert_close(record["val_curve"][0], record["baseline_har"], rtol=1e-5, atol=0)  # E0: at HAR
        assert all(math.isfinite(v) and v >= 0 for v in record["val_curve"]), record["val_curve"]
    if objective != "mse_log":  # another objective's numbers: not today's MSE of log volatility relabelled
        assert not math.isclose(data.baselines["har"], dataset(sp500, "mse_log").baselines["har"], rel_tol=1e-3)

    parent, trials = sweep_runs(uri)
    assert parent.data.tags[OBJECTIVE_TAG] == objective
    assert sorted(trials) == sorted(records)
    others = [f"val_loss_{o}" for o in OBJECTIVES if o != objective]
    for trial_id, run in trials.items():
        assert run.data.tags[OBJECTIVE_TAG] == objective
        metrics = run.data.metrics
        assert f"val_loss_{objective}" in metrics and "val_loss" not in metrics, sorted(metrics)
        assert not set(others) & set(metrics), sorted(metrics)
        history = MlflowClient(uri).get_metric_history(run.info.run_id, f"val_loss_{objective}")
        logged, curve = {m.step: m.value for m in history}, records[trial_id]["val_curve"]
        assert max(logged) == len(curve) - 1, (sorted(logged), curve)  # each epoch under the objective's key
        torch.testing.assert_close([logged[e] for e in sorted(logged)], [curve[e] for e in sorted(logged)],
                                   rtol=1e-6, atol=0)  # the curve the ledger ranks by

    if process.returncode == 0:  # the winner's look at the test segment: HAR's test loss under the objective
        (look,) = read_test_looks(folder)
        expected = mean_loss(objective, data.test_har, data.targets[data.test_index].astype(np.float64),
                             data.objective_scale)
        torch.testing.assert_close(look["baseline_har"], float(expected), rtol=1e-6, atol=0)
        assert math.isfinite(look["test_loss"]) and look["test_loss"] >= 0
        assert 0 <= look["vs_har"]["dm_pvalue"] <= 1


def test_a_resumed_sweep_keeps_its_objective(sweeps):
    _, storage, uri, process = sweeps("qlike")
    assert_ended_as_stated(process)
    before = {r["trial_id"] for r in json.loads((storage / "smoke" / LEDGER).read_text())}

    extended = run_cli("resume", "smoke", "--storage", storage, "--trials", "3")
    assert_ended_as_stated(extended)
    baselines = next(line for line in extended.stdout.splitlines() if line.startswith("baselines"))
    assert "qlike" in baselines or title("qlike") in baselines, baselines
    records = {r["trial_id"]: r for r in json.loads((storage / "smoke" / LEDGER).read_text())}
    (new,) = set(records) - before
    manifest = json.loads((storage / "smoke" / MANIFEST).read_text())
    assert manifest["space"]["data"]["objective"] == "qlike" and manifest["trials"] == 3
    _, trials = sweep_runs(uri)
    run = trials[new]
    assert run.data.tags[OBJECTIVE_TAG] == "qlike"
    assert "val_loss_qlike" in run.data.metrics and "val_loss_mse_log" not in run.data.metrics
    assert records[new]["baseline_har"] == records[next(iter(before))]["baseline_har"]  # the same qlike HAR
