"""Sweeps that search model and data settings by their dotted names: on Optuna's grid, each trial trains with its
own width and window (its workers build its Dataset from the sweep's bars) and the combinations the model refuses
end as `invalid` before any worker starts, pruned in Optuna, never failures; on Optuna's Gaussian process, width,
depth, window and learning rate together (issue 35's end-to-end case)."""

from __future__ import annotations

import json

import optuna
import pytest
import torch
import yaml

from model.data import DataConfig, load_dataset
from tests.cli import run_cli
from tests.tuning.sweeps import space_values
from tuning.sweep_files import LEDGER, sweep_paths

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # a sweep of its own: the longer tier

# headdim 32 divides the inner width of d_model 16 (32) and not that of d_model 24 (48); headdim 16 divides both
SEARCH = {"model.d_model": {"choices": [16, 24]}, "model.headdim": {"choices": [16, 32]},
          "data.window": {"choices": [16, 24]}}


def unsearched(fixed: dict, section: str, search: dict) -> dict:
    """A section's fixed settings without those the search searches (a setting both fixed and searched is refused);
    data.window stays, the shared Dataset's window."""
    return {key: value for key, value in fixed.items() if f"{section}.{key}" not in search}


def test_a_grid_over_width_and_window_trains_each_valid_combination_and_prunes_the_invalid_ones(bars, tmp_path):
    values = {**space_values(name="wide", initial=[], gate={"epoch": 2, "threshold": 100.0}), "sampler": "grid",
              "search": SEARCH}
    del values["trials"]  # grid, trials unset: the whole grid
    values["run"]["train"] = {"lr": 3e-3, "weight_decay": 1e-2, "batch_size": 64}
    values["run"]["model"] = unsearched(values["run"]["model"], "model", SEARCH)
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(values))
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "s")
    assert done.returncode == 0, done.stderr[-3000:]

    records = json.loads((tmp_path / "s" / "wide" / LEDGER).read_text())
    ended = sorted((tuple(r["params"][key] for key in SEARCH), r["stop_reason"], r["stop_epoch"])
                   for r in records if r["stage"] == "search")
    assert [combination for combination, _, _ in ended] == [(w, h, win) for w in (16, 24) for h in (16, 32)
                                                             for win in (16, 24)]  # the grid, once each
    invalid = [combination for combination, reason, epoch in ended if (reason, epoch) == ("invalid", 0)]
    assert invalid == [(24, 32, 16), (24, 32, 24)]
    assert all(reason in ("completed", "asha") for combination, reason, _ in ended if combination not in invalid)
    assert "ended invalid at epoch 0: " in done.stdout and "headdim must divide expand*d_model" in done.stdout
    assert "invalid@0" in done.stdout  # the leaderboard names them
    assert "failed" not in done.stdout.split("best:")[0].lower()

    paths = sweep_paths(str(tmp_path / "s"), "wide")
    study = optuna.load_study(study_name="wide", storage=paths.study_url)
    assert study.user_attrs["sampler"] == "grid"
    states = {t.user_attrs["stop_reason"]: t.state for t in study.trials if t.user_attrs.get("stop_reason")}
    assert states["invalid"] == optuna.trial.TrialState.PRUNED
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]


def test_gaussian_process_search_over_width_depth_window_and_learning_rate_runs_end_to_end(bars, tmp_path):
    search = {"model.d_model": {"choices": [16, 32]}, "model.n_layers": {"low": 1, "high": 2},
              "data.window": {"low": 16, "high": 32, "step": 8}, "learning_rate": {"low": 1e-3, "high": 1e-2,
                                                                                   "log": True}}
    untuned = {"model.d_model": 16, "model.n_layers": 1, "data.window": 32, "learning_rate": 3e-3}
    values = {**space_values(name="gp", trials=4, initial=[untuned], gate={"epoch": 2, "threshold": 100.0}),
              "sampler": "gp", "search": search}
    values["run"]["train"] = {"weight_decay": 1e-2, "batch_size": 64}
    values["run"]["model"] = unsearched(values["run"]["model"], "model", search)
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(values))
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "s")
    assert done.returncode == 0, done.stderr[-3000:]

    records = [r for r in json.loads((tmp_path / "s" / "gp" / LEDGER).read_text()) if r["stage"] == "search"]
    assert len(records) == 4 and all(r["stop_reason"] in ("completed", "asha") for r in records)
    for r in records:
        p = r["params"]
        assert p["model.d_model"] in (16, 32) and p["model.n_layers"] in (1, 2) and p["data.window"] in (16, 24, 32)
        assert 1e-3 <= p["learning_rate"] <= 1e-2
    study = optuna.load_study(study_name="gp", storage=sweep_paths(str(tmp_path / "s"), "gp").study_url)
    assert study.user_attrs["sampler"] == "gp" and len(study.trials) == 4
    assert "best: trial " in done.stdout

    (look,) = json.loads((tmp_path / "s" / "gp" / "test.json").read_text())  # each model on its own Dataset
    winner = next(r for r in records if r["trial_id"] == look["trial_id"])
    windows = winner["params"]["data.window"], untuned["data.window"]
    def n_test(window: int) -> int:  # every window's samples are those of the longest, 32 (sample_alignment.py)
        config = DataConfig(**{**values["run"]["data"], "window": window, "align_window": 32})
        return len(load_dataset(bars, config).test_index)

    assert look["n_test"] == n_test(windows[0]) == n_test(16)
    (initial,) = [r for r in records if all(r["params"][key] == value for key, value in untuned.items())]
    if look["trial_id"] != initial["trial_id"]:  # the untuned configuration did not win: compared with it
        versus = look["vs_initial"]
        if windows[0] == windows[1]:
            assert "n_test" not in versus  # the winner's Dataset, all its test samples
        else:  # each on its own Dataset, whose test samples are the same: all of them
            assert versus["n_test"] == look["n_test"]
        assert versus["ratio"] > 0 and versus["test_loss"] > 0
    baselines = {r["baseline_har"] for r in records}
    assert len(baselines) == 1, baselines  # every trial validated on the same samples: one HAR loss


def test_a_sweep_searching_the_window_records_one_baseline_har(bars, tmp_path):
    # Windows 16 and 32 on Optuna's grid: each trial builds its own Dataset, validated on the samples of window 32
    search = {"data.window": {"choices": [16, 32]}}
    values = {**space_values(name="aligned", initial=[], scheduler={"max_epochs": 2, "grace_period": 1}),
              "sampler": "grid", "search": search, "gate": {"epoch": 1, "threshold": 100.0}}
    del values["trials"]  # the whole grid: each window once
    values["run"]["train"] = {"lr": 3e-3, "weight_decay": 1e-2, "batch_size": 64}
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(values))
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "s")
    assert done.returncode == 0, done.stderr[-3000:]

    records = [r for r in json.loads((tmp_path / "s" / "aligned" / LEDGER).read_text()) if r["stage"] == "search"]
    assert sorted(r["params"]["data.window"] for r in records) == [16, 32]
    assert len({r["baseline_har"] for r in records}) == 1, records  # one HAR validation loss for the whole sweep
    aligned = load_dataset(bars, DataConfig(**{**values["run"]["data"], "align_window": 32}))  # window 16's
    for record in records:  # the aligned samples'
        torch.testing.assert_close(record["baseline_har"], aligned.baselines["har"])
    (look,) = json.loads((tmp_path / "s" / "aligned" / "test.json").read_text())
    assert look["n_test"] == len(aligned.test_index)
    torch.testing.assert_close(look["baseline_har"], aligned.test_baselines["har"])
