"""The sweep's report of its look at the test segment (tuning/cli/sweep_report.py)."""

from __future__ import annotations

from pathlib import Path

from tests.tuning.search.test_finalists import record
from tests.tuning.sweeps import SPACE
from tuning.cli.sweep_report import print_finalists, print_test_look
from tuning.search.space import parse_space

LOOK = {"trial_id": "w1", "best_epoch": 3, "test_loss": 0.5, "n_test": 120, "baseline_har": 0.6,
        "baseline_persistence": 0.9, "baseline_mean": 1.0,
        "vs_har": {"test_loss": 0.6, "ratio": 0.5 / 0.6, "dm_stat": -2.5, "dm_pvalue": 0.01}}


def initial_line(capsys, look: dict, folder: Path) -> str:
    print_test_look(look, folder)
    return next(line for line in capsys.readouterr().out.splitlines() if "untuned configuration 0." in line)


def test_the_untuned_configuration_on_the_winners_data_is_compared_on_every_test_sample(capsys, tmp_path):
    line = initial_line(capsys, {**LOOK, "vs_initial": {"trial_id": "i0", "test_loss": 0.8, "ratio": 0.625,
                                                        "dm_stat": -3.0, "dm_pvalue": 0.002}}, tmp_path)
    assert line.startswith("test segment: winner 0.500 vs the untuned configuration 0.800 (-37.5%, DM p=0.002)")
    assert "both forecast" not in line and "trial i0" in line


def test_the_untuned_configuration_on_other_data_settings_is_compared_on_the_samples_both_forecast(capsys,
                                                                                                 tmp_path):
    """Its window differs: the winner's loss on the common samples (ratio x the reference's), and how many."""
    line = initial_line(capsys, {**LOOK, "vs_initial": {"trial_id": "i0", "test_loss": 0.8, "ratio": 0.75,
                                                        "dm_stat": -1.0, "dm_pvalue": 0.3, "n_test": 100}}, tmp_path)
    assert line.startswith("test segment: winner 0.600 vs the untuned configuration 0.800 (-25.0%, DM p=0.30)")
    assert "(on the 100 test samples both forecast, each on its own data settings)" in line


def test_print_test_look_counts_the_looks_train_took_apart(capsys, tmp_path):
    """A look `train --look` added to test.json counts, and the sweep's report says whose it was."""
    import json

    from tuning.sweep_files import latest_look

    by_train = {**LOOK, "look": 2, "by": "train", "out": "/runs/prod", "test_loss": 0.4}
    (tmp_path / "test.json").write_text(json.dumps([{**LOOK, "look": 1}, by_train]))
    sweeps = latest_look(tmp_path, "w1")
    assert sweeps["look"] == 1  # the sweep's own look at its trial, not the retrained model's
    print_test_look(sweeps, tmp_path)
    assert "(look 1 of 2: 1 by `train --look`)" in capsys.readouterr().out


def test_print_finalists_shows_a_spread_only_over_two_runs_or_more(capsys):
    space = parse_space({**SPACE, "confirm": {"top_k": 2, "seeds": [7, 8]}}, "space")
    records = [record("a", 0.30), record("b", 0.40),
               record("a7", 0.32, stage="confirm", seed=7, finalist="a"),
               record("a8", 0.36, stage="confirm", seed=8, finalist="a"),
               record("b7", 0.50, stage="confirm", seed=7, finalist="b")]
    print_finalists(records, space)
    board = capsys.readouterr().out
    assert "val 0.3400 +- 0.0283 (runs 2/2)" in board  # the stdev of 0.32 and 0.36
    assert "val 0.5000 (runs 1/2 unconfirmed)" in board and "+- 0.0000" not in board


def test_the_look_and_the_leaderboard_name_the_objective_their_losses_are_in(capsys, tmp_path):
    """A look records its objective and the printed line names it; a look before objectives names none. The
    leaderboard's vs HAR is the trial's loss over HAR's, both of the one objective the line above it names."""
    from dataclasses import replace

    from tuning.cli.sweep_report import print_leaderboard

    print_test_look({**LOOK, "objective": "qlike"}, tmp_path)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("test: test loss 0.5000 on 120 test samples (trial w1, best.pt of epoch 3; QLIKE); HAR ")
    print_test_look(LOOK, tmp_path)
    assert "; QLIKE)" not in capsys.readouterr().out.splitlines()[0]

    trial = replace(record("t1", 0.3), baseline_har=0.6, baseline_persistence=1.2)
    print_leaderboard([trial], "mse_var")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("losses: validation MSE of variance, in units of the mean training variance squared; vs HAR, "
                        "vs pers.: over HAR's and persistence's, by the same objective")
    assert lines[2].split()[-2:] == ["0.50", "0.25"]  # 0.3 / 0.6 and 0.3 / 1.2
    print_leaderboard([trial])
    assert capsys.readouterr().out.startswith("rank ")  # no objective given: no line
