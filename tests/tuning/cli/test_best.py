"""`mamba-tune best` hands over only a fully confirmed finalist, and ships or refits it only with the bars it was
tuned on; `--unconfirmed` is the explicit way past an incomplete confirmation, and says so everywhere.

Each test breaks a copy of the session's finished sweep (tests/conftest.py): a confirmation run's record taken
out is what a sweep interrupted during confirmation, or one whose run failed, holds.
"""

from __future__ import annotations

import json
import shutil

import mlflow
import pytest
import yaml

from tests.bars import write_bars
from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import copy_sweep
from tuning.bars_file import sha256_of

pytestmark = pytest.mark.integration


def drop_a_confirmation_run(storage) -> dict:
    """Take the seed-1, fold-2 confirmation run out of the copy's ledger -> the finalist's search record."""
    ledger = storage / "t" / "trials.json"
    rows = json.loads(ledger.read_text())
    dropped = next(r for r in rows if r["stage"] == "confirm" and (r["seed"], r["fold"]) == (1, 2))
    ledger.write_text(json.dumps([r for r in rows if r is not dropped]))
    return next(r for r in rows if r["trial_id"] == dropped["finalist"])


@pytest.mark.faults  # confirmation cut short
def test_best_refuses_a_sweep_whose_confirmation_is_incomplete_and_says_what_is_missing(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    finalist = drop_a_confirmation_run(storage)
    for register in ((), ("--register", "mt-unconfirmed", "--tracking-uri", uri), ("--register", "mt-unconfirmed",
                                                                                 "--ensemble", "--tracking-uri", uri)):
        done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", *register)
        assert_one_line_error(done, f"sweep 't' has no confirmed winner yet: 1 confirmation run has no result "
                              f"(finalist {finalist['trial_id']}: 1 of 3); run them with `mamba-tune resume t "
                              f"--storage {storage}`, or pass --unconfirmed")
    assert not (tmp_path / "best.yaml").exists()
    assert mlflow.MlflowClient(uri).search_registered_models() == []  # nothing registered


@pytest.mark.faults  # confirmation cut short
def test_best_unconfirmed_hands_over_the_best_finalist_so_far_marked_unconfirmed(finished_sweep, bars, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    finalist = drop_a_confirmation_run(storage)
    done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", "--unconfirmed",
                   "--register", "mt-unconfirmed", "--tracking-uri", uri)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(runs 2/3 unconfirmed)" in done.stdout  # the finalists' board: its fresh runs done / planned
    text = (tmp_path / "best.yaml").read_text()
    assert "# UNCONFIRMED: chosen by `best --unconfirmed` with 2 of its 3 confirmation runs scored" in text
    tuned = yaml.safe_load(text)["tuned"]
    assert (tuned["trial"], tuned["unconfirmed"]) == (finalist["trial_id"], True)
    client = mlflow.MlflowClient(uri)
    version = client.get_model_version("mt-unconfirmed", "1")
    for tags in (version.tags, client.get_run(version.run_id).data.tags):
        assert tags["mamba_tune.confirmation"] == "unconfirmed"
        assert tags["mamba_tune.judged_by"] == "look 1 of 1"  # the sweep's look scored this finalist

    trained = run_cli("train", "--data", bars, "--config", tmp_path / "best.yaml", "--epochs", "1", "--out",
                      tmp_path / "prod", "--register", "mt-unconfirmed", "--tracking-uri", uri)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert f"warning: trial {finalist['trial_id']} is UNCONFIRMED" in trained.stderr
    assert client.get_model_version("mt-unconfirmed", "2").tags["mamba_tune.confirmation"] == "unconfirmed"


def test_best_without_a_look_says_so_and_register_needs_no_look(finished_sweep, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    (storage / "t" / "test.json").unlink()  # a sweep whose driver was killed before its look
    shown = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "shown.yaml")
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert f"take it with `mamba-tune resume t --storage {storage}`" in shown.stdout.splitlines()[-1]

    register = ("--register", "mt-unjudged", "--tracking-uri", uri)
    refused = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", *register)
    assert_one_line_error(refused, "sweep 't' has not looked at its test segment with trial ")
    assert f"take the look with `mamba-tune resume t --storage {storage}`, or pass --no-look" in refused.stderr
    alone = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", "--no-look")
    assert_one_line_error(alone, "--no-look says --register may ship a winner the sweep has not scored")
    assert not (tmp_path / "best.yaml").exists() and mlflow.MlflowClient(uri).search_registered_models() == []

    done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", *register, "--no-look")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "never scored on the test segment (--no-look)" in done.stdout
    client = mlflow.MlflowClient(uri)
    version = client.get_model_version("mt-unjudged", "1")
    for tags in (version.tags, client.get_run(version.run_id).data.tags):
        assert tags["mamba_tune.judged_by"] == "none" and "mamba_tune.test_loss_mse_log" not in tags


def test_a_winner_is_registered_and_refitted_only_with_the_bars_it_was_tuned_on(finished_sweep, bars, tmp_path):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    renamed = tmp_path / "elsewhere" / "renamed.parquet"  # the same bars under another path and name: the same file
    renamed.parent.mkdir()
    shutil.copyfile(bars, renamed)
    manifest = json.loads((storage / "t" / "sweep.json").read_text())
    assert manifest["bars"]["sha256"] == sha256_of(bars) and manifest["bars"]["rows"] == 1500
    (storage / "t" / "sweep.json").write_text(json.dumps({**manifest, "data": str(renamed)}))
    exported = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert exported.returncode == 0, exported.stderr[-3000:]

    write_bars(renamed, 1500, seed=7)  # the file the sweep names, rewritten with other bars since
    done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "again.yaml", "--register", "mt-bars",
                   "--tracking-uri", uri)
    assert_one_line_error(done, f"{renamed} has SHA-256 {sha256_of(renamed)[:16]}, and sweep 't' was tuned on bars "
                          f"with SHA-256 {sha256_of(bars)[:16]}: another file")
    assert not (tmp_path / "again.yaml").exists() and mlflow.MlflowClient(uri).search_registered_models() == []

    refit = run_cli("train", "--data", renamed, "--config", tmp_path / "best.yaml", "--refit", "--out",
                    tmp_path / "refit")
    assert_one_line_error(refit, f"{renamed} has SHA-256 {sha256_of(renamed)[:16]}, and trial ")
    assert sha256_of(bars)[:16] in refit.stderr and not (tmp_path / "refit").exists()
