"""The sweep's MLflow runs (tuning/tracking/runs.py): the looks at the test segment on the sweep's run (log_test_look),
and every loss keyed by the sweep's objective, with the tag that names it."""

from __future__ import annotations

import copy

import torch

from tests.tuning.sweeps import SPACE
from tuning.search.ledger import TrialRecord
from tuning.search.space import parse_space
from tuning.sweep_files import TRAIN_LOOK
from tuning.tracking.log import SWEEP_KEY, TrackingLog
from tuning.tracking.ops import LOOKS_MARKER
from tuning.tracking.runs import (
    LOOK_TAG,
    SweepTracking,
    TrialEnd,
    end_trial,
    log_test_look,
    log_trial_epoch,
    open_sweep,
)
from tuning.tracking.store import open_store, resolve_store


class Recorded:
    """A TrackingLog that keeps what it is asked to write; its sweep's parent run holds `parent_tags` (None: a new
    sweep, no parent run yet)."""

    def __init__(self, parent_tags: dict[str, str] | None = None):
        self.epochs: list[tuple[str, int, dict[str, float]]] = []
        self.tags: dict[str, str] = {}
        self.parent_tags = parent_tags

    def recorded_tags(self, key):
        return self.parent_tags if key == SWEEP_KEY else None

    def log_epoch(self, key, step, metrics, timestamp_ms=None):
        self.epochs.append((key, step, metrics))

    def set_tags(self, key, tags):
        self.tags.update(tags)

    def start_run(self, key, name, parent=None, tags=None, params=None):
        self.started = getattr(self, "started", {})
        self.started[key] = {"parent": parent, "tags": {k: str(v) for k, v in (tags or {}).items()},
                             "params": dict(params or {})}

    def log_input(self, key, bars, context="training"):
        pass

    def log_artifact(self, key, path, folder=None, remove_after=False):
        pass


VS_HAR = {"test_loss": 0.6, "ratio": 0.8, "dm_stat": -2.5, "dm_pvalue": 0.01, "dm_lags": 0, "dm_fallback": 1.0,
          "dm_stat_wide": -2.0, "dm_pvalue_wide": 0.05, "dm_lags_wide": 0, "dm_fallback_wide": 1.0}


def test_log_test_look_counts_a_train_look_without_making_it_the_sweeps_headline():
    own = {"look": 1, "trial_id": "a", "test_loss": 0.48, "baseline_har": 0.6, "n_test": 113, "vs_har": VS_HAR}
    train = {"look": 2, "by": TRAIN_LOOK, "trial_id": "a", "test_loss": 0.9, "baseline_har": 0.6, "n_test": 113,
             "vs_har": {**VS_HAR, "ratio": 1.5, "dm_pvalue": 0.9}}
    log = Recorded()
    log_test_look(log, [own, train], None)
    (key0, step0, first), (key1, step1, second) = log.epochs
    assert (key0, step0, key1, step1) == (SWEEP_KEY, 0, SWEEP_KEY, 1)
    assert second == {LOOKS_MARKER: 2.0}  # counted (test.json's count), nothing else: test_loss stays the sweep's
    torch.testing.assert_close(first["test_loss_mse_log"], 0.48)  # a look before objectives: mse_log
    torch.testing.assert_close(first[LOOKS_MARKER], 1.0)
    assert {k: first[f"test_{k}_har"] for k in ("dm_lags", "dm_fallback", "dm_lags_wide", "dm_fallback_wide")} == \
        {"dm_lags": 0.0, "dm_fallback": 1.0, "dm_lags_wide": 0.0, "dm_fallback_wide": 1.0}  # 0 lags: fell back
    assert log.tags == {LOOK_TAG: "done"}


def qlike_space():
    values = copy.deepcopy(SPACE)
    values["run"]["data"]["objective"] = "qlike"
    return values, parse_space(values, "space")


def test_a_qlike_sweep_tags_its_runs_and_keys_every_loss_by_its_objective(tmp_path):
    values, space = qlike_space()
    log = Recorded()
    tracking = open_sweep(log, tmp_path / "staging", "t", values, space, str(tmp_path / "absent.parquet"),
                          {"n_bars": 10}, {"har": 0.7, "persistence": 1.2, "mean": 1.5}, {"trials": 5})
    assert tracking.objective == "qlike"
    sweep = log.started[SWEEP_KEY]
    assert sweep["tags"]["mamba_tune.objective"] == "qlike"
    assert {k: v for k, v in sweep["params"].items() if k.startswith("baseline.")} == {
        "baseline.har_qlike": 0.7, "baseline.persistence_qlike": 1.2, "baseline.mean_qlike": 1.5}
    assert "QLIKE" in sweep["tags"]["mlflow.note.content"]

    epoch = {"epoch": 1, "train_loss": 0.9, "val_loss": 0.8, "best_val_loss": 0.8, "lr": 1e-3, "overfit_ratio": 0.9,
             "epoch_s": 0.2, "best_epoch": 1}
    log_trial_epoch(tracking, "a", {"learning_rate": 1e-3, "weight_decay": 1e-2, "batch_size": 64}, epoch)
    assert log.started["a"]["parent"] == SWEEP_KEY and log.started["a"]["tags"]["mamba_tune.objective"] == "qlike"
    ((key, step, metrics),) = log.epochs
    assert (key, step) == ("a", 1)
    assert metrics == {"train_loss_qlike": 0.9, "val_loss_qlike": 0.8, "best_val_loss_qlike": 0.8, "lr": 1e-3,
                       "overfit_ratio": 0.9, "epoch_s": 0.2}  # the losses keyed by the objective, nothing else


def test_a_look_is_logged_under_its_objectives_keys():
    look = {"look": 1, "trial_id": "a", "objective": "mse_var", "test_loss": 0.4, "baseline_har": 0.5,
            "baseline_persistence": 0.9, "baseline_mean": 1.0, "n_test": 113, "vs_har": VS_HAR,
            "vs_initial": {"ratio": 0.95, "dm_pvalue": 0.3}}
    log = Recorded()
    log_test_look(log, [look], None, objective="qlike")  # the look's own objective wins: it says what it is in
    ((_, _, metrics),) = log.epochs
    assert {k for k in metrics if k.endswith("_mse_var")} == {
        "test_loss_mse_var", "test_baseline_har_mse_var", "test_baseline_persistence_mse_var",
        "test_baseline_mean_mse_var"}
    assert not any(k in metrics for k in ("test_loss", "test_baseline_har", "test_loss_qlike"))
    assert {"n_test", "test_ratio_har", "test_dm_pvalue_har", "test_ratio_initial", LOOKS_MARKER} <= set(metrics)
    torch.testing.assert_close(metrics["test_loss_mse_var"], 0.4)


def test_sweep_tracking_of_a_space_before_objectives_is_the_targets_default():
    _, space = qlike_space()
    values = copy.deepcopy(SPACE)
    values["run"]["data"]["target"] = "return"
    for data_space, expected in ((parse_space(copy.deepcopy(SPACE), "space"), "mse_log"), (space, "qlike"),
                                 (parse_space(values, "space"), "mse")):
        tracking = SweepTracking(Recorded(), None, data_space, "t", "bars.parquet", None)
        assert tracking.objective == expected


PARAMS = {"learning_rate": 1e-3, "weight_decay": 1e-2, "batch_size": 64}
EPOCH = {"train_loss": 0.9, "val_loss": 0.8, "best_val_loss": 0.8, "lr": 1e-3}


def test_a_sweep_recorded_before_objectives_keeps_its_old_keys_and_adds_no_tag(tmp_path):
    log = Recorded(parent_tags={"mamba_tune.role": "sweep"})  # an earlier version's parent run: no objective tag
    tracking = open_sweep(log, tmp_path / "staging", "t", SPACE, parse_space(copy.deepcopy(SPACE), "space"),
                          str(tmp_path / "absent.parquet"), {"n_bars": 10}, {"har": 0.7}, {"trials": 5})
    assert tracking.predates_objectives and tracking.keys is None and tracking.objective == "mse_log"
    assert "mamba_tune.objective" not in log.started[SWEEP_KEY]["tags"]
    assert log.started[SWEEP_KEY]["params"]["baseline.har"] == 0.7  # the old run's param, not a second one
    log_trial_epoch(tracking, "b", PARAMS, {"epoch": 0, **EPOCH})  # a trial the resume starts
    assert "mamba_tune.objective" not in log.started["b"]["tags"]
    ((_, _, metrics),) = log.epochs
    assert metrics == EPOCH
    log_test_look(log, [{"look": 1, "trial_id": "b", "objective": "mse_log", "test_loss": 0.5, "n_test": 9}], None)
    assert log.epochs[-1][2] == {"test_loss": 0.5, "n_test": 9.0, LOOKS_MARKER: 1.0}


def test_a_resumed_sweep_recorded_before_objectives_continues_each_curve_under_its_key(tmp_path):
    store = resolve_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = open_store(store)
    experiment, spool = store.experiment_id(client, "t"), tmp_path / "pending.jsonl"
    old = TrackingLog(client, experiment, "s1", spool)  # as an earlier version logged it: no tag, old keys
    old.start_run(SWEEP_KEY, "t sweep", tags={"mamba_tune.role": "sweep"})
    old.start_run("a", "a", parent=SWEEP_KEY, tags={"trial_id": "a"})
    old.log_epoch("a", 0, {"val_loss": 1.0})
    old.log_epoch(SWEEP_KEY, 1, {"best_val_loss": 0.9, "trials_finished": 1})
    assert old.close(30) == 0

    log = TrackingLog(client, experiment, "s1", spool)  # resumed
    tracking = open_sweep(log, tmp_path / "staging", "t", SPACE, parse_space(copy.deepcopy(SPACE), "space"),
                          str(tmp_path / "absent.parquet"), {"n_bars": 10}, {"har": 0.7}, {"trials": 2})
    log_trial_epoch(tracking, "a", PARAMS, {"epoch": 1, **EPOCH})
    first = TrialRecord("a", PARAMS, "completed", 1, 0.8, 1, 1.0, 1.2, 1.0, (1.0, 0.8))
    end_trial(tracking, PARAMS, TrialEnd(first, [], None, (first, TrialRecord(**{**first.__dict__, "trial_id": "c",
                                                                                   "best_val_loss": 0.7}))))
    assert log.close(30) == 0
    runs = {r.data.tags["mamba_tune.key"]: r.info.run_id for r in client.search_runs([experiment])}

    def curve(key, metric):
        return sorted((m.step, m.value) for m in client.get_metric_history(runs[key], metric))

    torch.testing.assert_close(curve("a", "val_loss"), [(0, 1.0), (1, 0.8)])
    torch.testing.assert_close(curve(SWEEP_KEY, "best_val_loss"), [(1, 0.9), (2, 0.7)])
    assert not any(k.endswith("_mse_log") for key in runs for k in client.get_run(runs[key]).data.metrics)
