"""`mamba-tune sweep / resume / best` end to end, on a real local Ray (integration: a few minutes)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import mlflow
import optuna
import pytest
import torch
import yaml
from optuna.trial import TrialState

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.mlflow_server import free_port
from tests.tuning.sweeps import SPACE, STRAIGHT_THROUGH, decisions, ledger, write_space
from tuning.bars_file import sha256_of
from tuning.cli.figures import verdict_line
from tuning.search.space import parse_space
from tuning.tracking.lineage import file_digest

pytestmark = pytest.mark.integration


def test_sweep_stops_trials_by_asha_and_gate_and_its_best_trains_again(bars, finished_sweep, tmp_path):
    _, storage, _, done = finished_sweep
    assert f"study:   sqlite:///{storage / 't' / 'optuna.db'}" in done.stdout
    records = {k: r for k, r in ledger(storage / "t").items() if r["stage"] == "search"}
    reasons = sorted(r["stop_reason"] for r in records.values())
    assert len(records) == 5 and "gate" in reasons and "asha" in reasons and "completed" in reasons, reasons
    gated = next(r for r in records.values() if r["stop_reason"] == "gate")
    assert (gated["params"]["learning_rate"], gated["stop_epoch"]) == (1e-7, 2)
    assert decisions(records, SPACE["initial"]) == STRAIGHT_THROUGH  # what an interrupted, resumed sweep must match
    assert "rank trial" in done.stdout and "completed@4" in done.stdout  # the leaderboard
    assert "vs E0  vs HAR vs pers." in done.stdout and "baselines (validation MSE of log volatility, scaled units): HAR " in done.stdout

    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    states = {t.user_attrs["ray_trial_id"]: t.state for t in study.trials}
    assert states == {k: {"completed": TrialState.COMPLETE, "asha": TrialState.PRUNED,
                          "gate": TrialState.PRUNED}[r["stop_reason"]] for k, r in records.items()}

    exported = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert exported.returncode == 0, exported.stderr
    assert "hyperparameter importance (fANOVA over 5 completed and pruned trials): " in exported.stdout
    best = min((r for r in records.values() if r["stop_reason"] == "completed"), key=lambda r: r["best_val_loss"])
    # The sweep's one look at the test segment: the winner's best.pt, printed by the sweep and by `best`.
    (look,) = json.loads((storage / "t" / "test.json").read_text())  # every look kept: this sweep took one
    assert (look["trial_id"], look["best_epoch"], look["n_test"]) == (best["trial_id"], best["best_epoch"], 131)
    assert (look["look"], look["trials"]) == (1, 5)
    line = f"test: test loss {look['test_loss']:.4f} on 131 test samples (trial {best['trial_id']}, best.pt of epoch"
    assert line in done.stdout and line in exported.stdout
    # The verdict against HAR, by the sweep and by `best`: the ratio and the Diebold-Mariano p-value of test.json.
    har = look["vs_har"]
    torch.testing.assert_close(har["ratio"], look["test_loss"] / look["baseline_har"])
    verdict = verdict_line(look["test_loss"], look["baseline_har"], har["dm_pvalue"])
    assert verdict in done.stdout.splitlines() and verdict in exported.stdout.splitlines()
    initial = look["vs_initial"]  # the untuned configuration: the space's first initial point, for reference
    assert initial["trial_id"] == next(k for k, r in records.items() if r["params"] == SPACE["initial"][0])
    config = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert config["train"]["lr"] == best["params"]["learning_rate"] and config["train"]["epochs"] == 4
    assert config["model"]["d_model"] == 16 and config["data"]["window"] == 16
    assert config["tuned"] == {"sweep": "t", "trial": best["trial_id"], "best_epoch": best["best_epoch"],
                               "best_val_loss": best["best_val_loss"], "refit": False,  # what `train --refit` reads
                               "data_sha256": sha256_of(bars)}  # and whose bars (`unconfirmed: true` only if so)
    # What decides the numbers is pinned: the trial ran on 1 CPU thread (cpus_per_worker 1), on the CPU, seed 0.
    assert {k: config["train"][k] for k in ("threads", "device", "seed", "precision")} == {
        "threads": 1, "device": "cpu", "seed": 0, "precision": "fp32"}

    # On this machine every core is free, and still the trial's curve comes back, each epoch to 1e-6, up to its best
    # epoch: the schedule it was selected with, stopped there.
    trained = run_cli("train", "--data", bars, "--config", tmp_path / "best.yaml", "--out", tmp_path / "prod")
    assert trained.returncode == 0, trained.stderr
    curve = [m["val_loss"] for m in json.loads((tmp_path / "prod" / "metrics.json").read_text())]
    assert len(curve) == best["best_epoch"] + 1
    torch.testing.assert_close(torch.tensor(curve, dtype=torch.float64),
                               torch.tensor(best["val_curve"][:len(curve)], dtype=torch.float64), rtol=1e-6, atol=0)
    # The sweep's bars: their test segment is the sweep's held-out data, scored only as a look it counts (--look).
    assert not (tmp_path / "prod" / "test.json").exists()
    assert "test           not scored: the test segment of these bars is the one sweep t held out" in trained.stdout


def test_a_sweep_asking_for_gpus_auto_on_a_cluster_without_gpus_trains_on_cpus_and_says_so(finished_sweep):
    _, storage, _, done = finished_sweep
    said = ("resources: gpus_per_trial auto, and no node of this cluster has a GPU or can launch one: "
            "trials run on CPUs\nsweep t: 5 trials, 1 trial(s) at once, each 1 worker(s) of 1 CPU\n")
    assert said in done.stdout
    assert "backend: torch (auto: trials run on CPU)" in done.stdout.splitlines()  # the header: which Mamba-2 path
    manifest = json.loads((storage / "t" / "sweep.json").read_text())
    assert manifest["space"]["resources"]["gpus_per_trial"] == 0  # resumed as it ran
    assert parse_space(manifest["space"], "sweep.json").run.train.device == "cpu"  # every trial's device


def test_a_sweeps_settings_given_by_set_are_the_space_it_records_and_resumes(finished_sweep):
    folder, storage, _, _ = finished_sweep
    assert "confirm" not in yaml.safe_load((folder / "space.yaml").read_text())  # the file has none
    manifest = json.loads((storage / "t" / "sweep.json").read_text())
    assert manifest["space"]["confirm"] == {"top_k": 1, "seeds": [1], "folds": 2}  # --set's, as run


def test_sweep_confirms_its_finalist_over_seeds_and_folds(finished_sweep, tmp_path):
    """confirm: {top_k: 1, seeds: [1], folds: 2}: the best search trial again on (seed 0, fold 2), (1, 1), (1, 2)."""
    _, storage, uri, done = finished_sweep
    records = ledger(storage / "t")
    search = [r for r in records.values() if r["stage"] == "search"]
    finalist = min((r for r in search if r["stop_reason"] == "completed"), key=lambda r: r["best_val_loss"])
    runs = sorted((r for r in records.values() if r["stage"] == "confirm"), key=lambda r: (r["seed"], r["fold"]))
    assert [(r["seed"], r["fold"], r["finalist"]) for r in runs] == [
        (0, 2, finalist["trial_id"]), (1, 1, finalist["trial_id"]), (1, 2, finalist["trial_id"])]
    assert all(r["params"] == finalist["params"] and (r["stop_reason"], r["stop_epoch"]) == ("completed", 4)
               for r in runs)  # no scheduler, no gate: each to its last epoch
    curves = {(r["seed"], r["fold"]): r["val_curve"] for r in [finalist, *runs]}
    assert curves[(0, 1)][0] != curves[(1, 1)][0]  # another seed: another initialisation, the same samples
    assert curves[(0, 1)][0] != curves[(0, 2)][0]  # another fold: other validation samples

    mean = sum(r["best_val_loss"] for r in runs) / 3  # its fresh runs alone: the search trial's loss is biased low
    assert f"val {mean:.4f} +- " in done.stdout and "(runs 3/3)" in done.stdout
    assert f"search alone {finalist['best_val_loss']:.4f}" in done.stdout
    assert "finalists (confirm: top 1; seeds 0, 1; 2 fold(s)):" in done.stdout
    assert f"best: trial {finalist['trial_id']} (the confirmed winner)" in done.stdout
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    assert len(study.trials) == 5  # confirmation runs are not Optuna samples
    assert study.user_attrs["sampler"] == "tpe"  # the default sampler, recorded in the study
    score = study.user_attrs[f"finalist.{finalist['trial_id']}"]
    assert score["n"] == 3 and sorted(r["trial_id"] for r in score["runs"]) == sorted(r["trial_id"] for r in runs)
    torch.testing.assert_close(score["mean"], mean, rtol=1e-12, atol=0)
    torch.testing.assert_close(score["search_loss"], finalist["best_val_loss"])

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("t").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`mamba_tune.role` = 'sweep'")
    assert parent.data.params["sampler"] == "tpe"
    for record in [finalist, *runs]:
        (run,) = client.search_runs([experiment], f"tags.trial_id = '{record['trial_id']}'")
        tags = run.data.tags
        assert (tags["mamba_tune.stage"], tags["mamba_tune.seed"], tags["mamba_tune.fold"]) == (
            record["stage"], str(record["seed"]), str(record["fold"]))
        assert run.data.params["train.seed"] == str(record["seed"]) and run.data.params["data.fold"] == str(
            record["fold"])

    exported = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert exported.returncode == 0 and "(runs 3/3)" in exported.stdout, exported.stderr
    assert f"Confirmed over seeds and folds: mean best val_loss {mean:.4f}" in (tmp_path / "best.yaml").read_text()


def test_sweep_logs_every_trial_to_mlflow_as_a_nested_run(finished_sweep, bars, tmp_path):
    _, storage, uri, done = finished_sweep
    assert f"mlflow:  experiment t in {uri}" in done.stdout
    # Ray's own lines stay out of the output, in the ray.log it names once (the sweep's lines have no colour codes)
    assert done.stdout.count(f"ray:     its own messages go to {storage / 't' / 'ray.log'}") == 1
    assert (storage / "t" / "ray.log").is_file() and not (storage / "t" / "driver.json").exists()
    assert "\x1b[" not in done.stdout + done.stderr and "(raylet)" not in done.stdout + done.stderr
    assert_sweep_logged(uri, "t", ledger(storage / "t"), tmp_path)
    (look,) = json.loads((storage / "t" / "test.json").read_text())
    (parent,) = mlflow.MlflowClient(uri).search_runs(
        [mlflow.MlflowClient(uri).get_experiment_by_name("t").experiment_id], "tags.`mamba_tune.role` = 'sweep'")
    assert {k: v for k, v in parent.data.metrics.items() if "test" in k} == {
        "test_loss_mse_log": look["test_loss"], "test_baseline_har_mse_log": look["baseline_har"],  # the objective's
        "n_test": look["n_test"], "test_baseline_persistence_mse_log": look["baseline_persistence"],  # keys
        "test_baseline_mean_mse_log": look["baseline_mean"],
        "test_ratio_har": look["vs_har"]["ratio"], "test_dm_stat_har": look["vs_har"]["dm_stat"],
        "test_dm_pvalue_har": look["vs_har"]["dm_pvalue"], "test_ratio_initial": look["vs_initial"]["ratio"],
        **{f"test_{k}_har": look["vs_har"][k] for k in ("dm_lags", "dm_fallback", "dm_stat_wide", "dm_pvalue_wide",
                                                        "dm_lags_wide", "dm_fallback_wide")},
        "test_dm_pvalue_initial": look["vs_initial"]["dm_pvalue"], "test_looks": 1}
    assert parent.data.tags["mamba_tune.test_look"] == "done"
    assert not (storage / "t" / "tracking").exists() and not (storage / "t" / "tracking-pending.jsonl").exists()
    assert not list((storage / "t" / "train").glob("*/best"))  # each trial's best.pt snapshots, staged and removed
    (dataset,) = [i.dataset for i in parent.inputs.dataset_inputs]  # the bars, by name and content digest
    assert (dataset.name, dataset.digest, json.loads(dataset.source)["uri"]) == (
        bars.stem, file_digest(bars), bars.resolve().as_uri())
    assert json.loads(dataset.profile)["n_test"] == 131
    importances = json.loads(Path(mlflow.MlflowClient(uri).download_artifacts(
        parent.info.run_id, "param_importances.json", str(tmp_path))).read_text())
    assert (importances["method"], importances["trials"]) == ("fanova", 5)  # 5 search trials: completed or pruned
    assert set(importances["importances"]) == {"learning_rate", "weight_decay", "batch_size"}
    torch.testing.assert_close(sum(importances["importances"].values()), 1.0)


@pytest.mark.faults  # a tracking server down
def test_sweep_refuses_at_once_a_tracking_server_that_does_not_answer(bars, tmp_path):
    start = time.monotonic()
    url = f"http://127.0.0.1:{free_port()}"
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
               "--tracking-uri", url, timeout=120)
    assert_one_line_error(done, f"tracking store {url}: not reachable (")
    assert time.monotonic() - start < 30 and not (tmp_path / "sweeps" / "t").exists()  # before Ray, nothing written


@pytest.mark.faults  # bad input: resources
@pytest.mark.parametrize(
    ("resources", "message"),
    [({"cpus_per_worker": 8}, "resources: a trial asks for 1 worker(s) of 8 CPU each, the cluster"),
     ({"gpus_per_trial": 1}, "resources: a trial asks for 1 worker(s) of 1 CPU and 1 GPU each"),
     ({"workers": 64}, "resources: a trial asks for 64 worker(s)")],
)
def test_sweep_refuses_at_once_what_the_cluster_cannot_hold(bars, tmp_path, resources, message):
    """(gpus_per_trial auto is not refused here: with no GPU anywhere the sweep runs on CPUs, see above.)"""
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


@pytest.mark.parametrize(("pair", "error"), [
    ("scheduler.max_epocs=4", "{space} (with --set scheduler.max_epocs=...): unknown key 'max_epocs' in scheduler; "
                              "did you mean scheduler.max_epochs?"),
    ("scheduler.max_epochs=0", "{space} (with --set scheduler.max_epochs=...): scheduler: max_epochs must be a "
                               "positive integer, got 0"),
    ("search.learning_rate.high=abc", "{space} (with --set search.learning_rate.high=...): search.learning_rate "
                                      "needs float low and high (train.lr)"),
    ("trials.n=3", "--set trials.n: trials is a setting, not a section of settings; set it whole"),
])
def test_sweep_set_is_validated_as_the_file_is_before_anything_starts(bars, tmp_path, pair, error):
    space = write_space(tmp_path)
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps", "--set", pair)
    assert_one_line_error(done, error.format(space=space))
    assert not (tmp_path / "sweeps").exists()
