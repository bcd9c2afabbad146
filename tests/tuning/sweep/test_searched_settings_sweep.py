"""A sweep that searches model and data settings by their dotted names on Optuna's grid sampler: each trial
trains with its own width and window (its workers build its Dataset from the sweep's bars), and the
combinations the model refuses end as `invalid` before any worker starts, pruned in Optuna, never failures."""

from __future__ import annotations

import json

import optuna
import pytest
import yaml

from tests.cli import run_cli
from tests.tuning.sweeps import space_values
from tuning.sweep_files import LEDGER, sweep_paths

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # a sweep of its own: the longer tier

# headdim 32 divides the inner width of d_model 16 (32) and not that of d_model 24 (48); headdim 16 divides both
SEARCH = {"model.d_model": {"choices": [16, 24]}, "model.headdim": {"choices": [16, 32]},
          "data.window": {"choices": [16, 24]}}


def test_a_grid_over_width_and_window_trains_each_valid_combination_and_prunes_the_invalid_ones(bars, tmp_path):
    values = {**space_values(name="wide", initial=[], gate={"epoch": 2, "threshold": 100.0}), "sampler": "grid",
              "search": SEARCH}
    del values["trials"]  # grid, trials unset: the whole grid
    values["run"]["train"] = {"lr": 3e-3, "weight_decay": 1e-2, "batch_size": 64}
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
