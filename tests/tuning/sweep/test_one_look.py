"""The one look at the test segment (tuning/sweep/one_look.py) is never lost and never silently repeated: `resume`
takes a look the driver did not, tries a failed one again, and a look at another winner is added, never replacing.

Each test breaks a copy of the session's finished sweep (tests/conftest.py) the way a killed driver, a lost
checkpoint or an extension leaves it; `resume` of a sweep whose trials have all ended starts no Ray.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.cli import run_cli
from tests.tuning.sweeps import copy_sweep, state_listed, sweep_run

pytestmark = pytest.mark.integration


def looks(storage) -> list[dict]:
    return json.loads((storage / "t" / "test.json").read_text())


@pytest.mark.faults  # a driver killed before its look
def test_resume_takes_the_look_a_killed_driver_left_undone_and_nothing_else(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    (look,) = looks(storage)
    (storage / "t" / "test.json").unlink()  # the driver killed after the last confirmation run, before its look
    ledger = (storage / "t" / "trials.json").read_text()
    checkpoints = sorted(p.relative_to(storage) for p in (storage / "t" / "train").rglob("*"))
    assert state_listed(storage) == "interrupted"  # not finished while its look is missing

    done = run_cli("resume", "t", "--storage", storage)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "had finished its trials and confirmation runs but not its look at the test segment: taken now" in done.stdout
    (taken,) = looks(storage)
    assert (taken["trial_id"], taken["look"], taken["trials"]) == (look["trial_id"], 1, 5)
    torch.testing.assert_close(taken["test_loss"], look["test_loss"])  # the same best.pt, scored the same
    torch.testing.assert_close(taken["vs_har"], look["vs_har"])
    assert (storage / "t" / "trials.json").read_text() == ledger  # no trial, no confirmation run again
    assert sorted(p.relative_to(storage) for p in (storage / "t" / "train").rglob("*")) == checkpoints
    assert "test segment: winner " in done.stdout.splitlines()[-1]  # the verdict, last
    run = sweep_run(uri)
    assert run.data.tags["mamba_tune.test_look"] == "done" and run.data.metrics["test_looks"] == 1

    again = run_cli("resume", "t", "--storage", storage)
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stderr[-3000:]
    assert looks(storage) == [taken]  # never repeated
    assert state_listed(storage) == "finished"


@pytest.mark.faults  # a look that fails
def test_a_failed_look_is_said_and_tagged_and_resume_tries_it_again(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    (look,) = looks(storage)
    (storage / "t" / "test.json").unlink()
    trial = storage / "t" / "train" / look["trial_id"]
    trial.rename(tmp_path / "away")  # the winner's checkpoints out of reach

    failed = run_cli("resume", "t", "--storage", storage)
    assert failed.returncode == 1, failed.stderr[-3000:]
    line = f"error: test segment: could not score trial {look['trial_id']} there ("
    assert failed.stderr.splitlines()[-1].startswith(line) and "`mamba-tune resume t" in failed.stderr
    assert not (storage / "t" / "test.json").exists()
    tag = sweep_run(uri).data.tags["mamba_tune.test_look"]
    assert tag.startswith(f"failed: could not score trial {look['trial_id']} there"), tag

    (tmp_path / "away").rename(trial)
    done = run_cli("resume", "t", "--storage", storage)
    assert done.returncode == 0, done.stderr[-3000:]
    (taken,) = looks(storage)
    torch.testing.assert_close(taken["test_loss"], look["test_loss"])
    assert sweep_run(uri).data.tags["mamba_tune.test_look"] == "done"


@pytest.mark.faults  # a second look, at another winner
def test_a_look_at_another_winner_is_added_and_every_look_is_counted(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    (look,) = looks(storage)
    earlier = {**look, "trial_id": "earlier_00000", "trials": 3}  # the winner before an extension, looked at then
    (storage / "t" / "test.json").write_text(json.dumps([earlier]))

    done = run_cli("resume", "t", "--storage", storage)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = looks(storage)
    assert first == earlier  # kept as it was
    assert (second["trial_id"], second["look"], second["trials"]) == (look["trial_id"], 2, 5)
    run = sweep_run(uri)
    assert run.data.metrics["test_looks"] == 2
    torch.testing.assert_close(run.data.metrics["test_loss_mse_log"], second["test_loss"])

    best = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert best.returncode == 0, best.stderr[-3000:]
    assert "(look 2 of 2: each extension whose winner changed looked again)" in best.stdout
    verdicts = [line for line in best.stdout.splitlines() if line.startswith("test segment: winner ")]
    assert verdicts and " vs HAR " in verdicts[-1], best.stdout  # the verdict against HAR, last of them


def test_initial_trial_is_the_search_trial_of_the_first_initial_point():
    from tests.tuning.search.test_finalists import record
    from tests.tuning.sweeps import SPACE
    from tuning.search.space import parse_space
    from tuning.sweep.one_look import initial_trial

    space = parse_space(SPACE, "space")
    first = replace(record("a", 0.5), params=dict(SPACE["initial"][0]))
    confirming = replace(first, trial_id="c", stage="confirm", finalist="a")  # the same parameters, confirmed
    assert initial_trial([confirming, record("x", 0.4), first], space).trial_id == "a"
    assert initial_trial([record("x", 0.4)], space) is None
    assert initial_trial([first], parse_space({**SPACE, "initial": []}, "space")) is None


def test_two_models_trained_on_other_windows_are_compared_on_the_test_samples_both_forecast(tmp_path):
    """The untuned configuration's window differs from the winner's (a searched data.window): each forecasts the
    samples of its own Dataset; the comparison keeps the targets both forecast, in the winner's units."""
    from model.data import DataConfig, load_dataset
    from tests.bars import write_bars
    from tuning.sweep.one_look import on_common_test_samples

    bars = write_bars(tmp_path / "bars.parquet", 1500, seed=3)
    short, long = (load_dataset(bars, DataConfig(window=w, horizon=6)) for w in (32, 64))
    assert len(long.test_index) < len(short.test_index)  # a longer window's first test sample ends later
    assert short.scaler.target_std != long.scaler.target_std  # and its training targets differ

    def squared_errors(data) -> np.ndarray:  # (n_test,) one error per target, the same in raw units whichever data
        return (data.test_index.astype(np.float64) % 7 + 1) / data.scaler.target_std ** 2

    mine, theirs = on_common_test_samples(squared_errors(short), short, squared_errors(long), long)
    assert len(long.test_index) == len(mine) == len(theirs)
    torch.testing.assert_close(theirs, mine)  # the same targets, in the short window's units
    expected = (long.test_index.astype(np.float64) % 7 + 1) / short.scaler.target_std ** 2
    torch.testing.assert_close(mine, expected)
    same = on_common_test_samples(squared_errors(short), short, squared_errors(short) * 2, short)
    assert len(same[0]) == len(same[1]) == len(short.test_index) and same[1] is not same[0]
    torch.testing.assert_close(same[1], squared_errors(short) * 2)  # one Dataset: as they are


def test_losses_of_another_window_are_brought_to_the_winners_units_as_the_objective_needs(tmp_path):
    """QLIKE depends on σ²/h alone: no rescaling; mse_var's losses are in units of each Dataset's v̄²: the square of
    the ratio of the two v̄; mse_log's, squared errors of scaled targets: the ratio of the target variances."""
    from model.data import DataConfig, load_dataset
    from tests.bars import write_bars
    from tuning.sweep.one_look import on_common_test_samples

    bars = write_bars(tmp_path / "bars.parquet", 1500, seed=3)
    for objective in ("qlike", "mse_var", "mse_log"):
        short, long = (load_dataset(bars, DataConfig(window=w, horizon=6, objective=objective)) for w in (32, 64))
        theirs = np.ones(len(long.test_index))
        _, rescaled = on_common_test_samples(np.ones(len(short.test_index)), short, theirs, long)
        expected = {"qlike": 1.0,
                    "mse_var": (long.objective_scale.variance_mean / short.objective_scale.variance_mean) ** 2,
                    "mse_log": (long.scaler.target_std / short.scaler.target_std) ** 2}[objective]
        assert expected != 1.0 or objective == "qlike"
        torch.testing.assert_close(rescaled, np.full(len(long.test_index), expected))
