"""The Optuna searcher's trial states, driven as Tune drives it (no cluster needed)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuning.search.gate import GateConfig
from tuning.search.searcher import fail_lost_trials, make_searcher
from tuning.search.space import load_space

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def searcher(tmp_path):
    space = load_space(ROOT / "search_spaces/smoke.yaml")  # 6 epochs, the gate at epoch 2
    space = dataclasses.replace(space, gate=GateConfig(epoch=2, ratio_to_e0=0.9))  # (E0-relative: clearer numbers)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    return make_searcher(space, url, "smoke"), url


def result(epoch, val_loss, best=None):
    return {"epoch": epoch, "val_loss": val_loss, "best_val_loss": best if best is not None else val_loss,
            "e0_val_loss": 1.0, "baseline_persistence": 0.4}


def run_trial(searcher, trial_id, losses, **complete):
    """Suggest, report one result per epoch (the last one only to on_trial_complete, as Tune does)."""
    params = searcher.suggest(trial_id)
    for epoch, loss in enumerate(losses[:-1]):
        searcher.on_trial_result(trial_id, result(epoch, loss, best=min(losses[:epoch + 1])))
    searcher.on_trial_complete(trial_id, result(len(losses) - 1, losses[-1], best=min(losses)), **complete)
    return params


def study_trials(url):
    return optuna.load_study(study_name="smoke", storage=url).trials


def test_searcher_evaluates_the_initial_point_first(searcher):
    search, _ = searcher
    assert search.suggest("t0") == {"learning_rate": 1e-3, "weight_decay": 1e-1, "batch_size": 128}  # smoke.yaml's


def test_searcher_records_trial_states_by_stop_reason(searcher):
    search, url = searcher
    run_trial(search, "done", [1.0, 0.6, 0.5, 0.45, 0.4, 0.42, 0.41])  # all 6 epochs
    run_trial(search, "asha", [1.0, 0.8, 0.7])  # stopped at epoch 2, passing the gate
    run_trial(search, "gated", [1.0, 0.99, 0.95])  # at epoch 2 not 10% better than E0
    run_trial(search, "diverged", [1.0, math.nan])
    run_trial(search, "crashed", [1.0], error=True)
    trials = {t.user_attrs["ray_trial_id"]: t for t in study_trials(url)}
    assert {k: (t.state, t.user_attrs["stop_reason"]) for k, t in trials.items()} == {
        "done": (TrialState.COMPLETE, "completed"), "asha": (TrialState.PRUNED, "asha"),
        "gated": (TrialState.PRUNED, "gate"), "diverged": (TrialState.FAIL, "nan"),
        "crashed": (TrialState.FAIL, "error")}
    assert trials["done"].value == 0.4  # the best epoch's loss, not the last one
    assert trials["gated"].intermediate_values == {0: 1.0, 1: 0.99, 2: 0.95}  # the stopping epoch included
    assert trials["gated"].user_attrs["stop_epoch"] == 2
    assert trials["diverged"].intermediate_values == {0: 1.0}  # the non-finite epoch is not a value


def test_a_pruned_trial_holds_the_best_loss_asha_ranked_it_by_not_its_last(searcher):
    search, url = searcher
    run_trial(search, "noisy", [1.0, 0.6, 0.8])  # ASHA stopped it at epoch 2, its best 0.6 at epoch 1
    (trial,) = study_trials(url)
    assert trial.state == TrialState.PRUNED and trial.user_attrs["stop_reason"] == "asha"
    assert trial.intermediate_values == {0: 1.0, 1: 0.6, 2: 0.6} and trial.value == 0.6


def test_searcher_reports_an_epoch_once(searcher):
    search, url = searcher
    search.suggest("t")
    for _ in range(2):  # a resumed trial repeats the epoch it was interrupted in
        search.on_trial_result("t", result(1, 0.7))
    search.on_trial_complete("t", result(6, 0.5))
    assert study_trials(url)[0].intermediate_values == {1: 0.7, 6: 0.5}


def test_fail_lost_trials_ends_only_the_trials_still_running(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(study_name="s", storage=url)
    done = study.ask()
    study.tell(done, 1.0)
    study.ask()  # started by a driver killed before Ray Tune saved it
    assert fail_lost_trials(url, "s") == 1 and fail_lost_trials(url, "s") == 0
    states = [(t.state, t.user_attrs.get("stop_reason")) for t in optuna.load_study(study_name="s", storage=url).trials]
    assert states == [(TrialState.COMPLETE, None), (TrialState.FAIL, "lost")]


def test_a_trial_names_its_ray_trial_as_it_is_asked_for_so_a_lost_one_names_its_folder(searcher):
    search, url = searcher
    search.suggest("running")  # its driver is killed now: Ray Train may have written train/running already
    (trial,) = study_trials(url)
    assert trial.state == TrialState.RUNNING and trial.user_attrs["ray_trial_id"] == "running"
    fail_lost_trials(url, "smoke")
    (trial,) = study_trials(url)
    assert trial.user_attrs == {"ray_trial_id": "running", "stop_reason": "lost"}
