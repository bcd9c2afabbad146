"""`mamba-tune resume NAME --trials N`: a finished sweep goes on to N search trials, each new trial once in Ray Tune,
the Optuna study, the ledger and MLflow; the trials it had are kept as they were."""

from __future__ import annotations

import optuna
import pytest

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, ledger, write_space

pytestmark = pytest.mark.integration


@pytest.mark.faults  # resume (as tests/reliability's)
def test_resume_with_more_trials_extends_a_finished_sweep_once_everywhere(bars, tmp_path, mlflow_server):
    storage, uri = tmp_path / "sweeps", mlflow_server.url  # a real `mlflow server`; resume logs where the sweep did
    space = write_space(tmp_path, trials=2, initial=SPACE["initial"][:2])  # the first completes, the second is gated
    first = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri)
    assert first.returncode == 0, first.stderr[-3000:]
    before = ledger(storage / "t")

    extended = run_cli("resume", "t", "--storage", storage, "--trials", "4")
    assert extended.returncode == 0, extended.stderr[-3000:]
    after = ledger(storage / "t")
    assert len(after) == 4 and all(after[k] == record for k, record in before.items())  # kept, not run again
    assert (storage / "t" / "tune").is_dir() and (storage / "t" / "tune-to-4").is_dir()  # the extension's experiment
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    assert sorted(t.user_attrs["ray_trial_id"] for t in study.trials) == sorted(after)  # each trial once
    new = [r["params"] for k, r in after.items() if k not in before]
    assert all(p not in [dict(q) for q in SPACE["initial"][:2]] for p in new)  # TPE's, not the initial points again
    assert_sweep_logged(uri, "t", after, tmp_path)  # one parent run, a run per trial, each epoch once

    again = run_cli("resume", "t", "--storage", storage)
    assert again.returncode == 0 and "has finished all 4 trials" in again.stdout, again.stdout + again.stderr
    listed = run_cli("list", "--storage", storage)
    assert listed.returncode == 0 and "finished" in listed.stdout and "4/4" in listed.stdout, listed.stdout
    assert_one_line_error(run_cli("resume", "t", "--storage", storage, "--trials", "3"),
                          "--trials 3 is fewer than the 4 trials sweep 't' has asked for")
    assert len(ledger(storage / "t")) == 4
