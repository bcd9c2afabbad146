"""The sweep's driver interrupted mid-sweep, by Ctrl-C (SIGINT) or killed outright (SIGKILL): `resume` finishes it.

Finished trials are kept and not run again; the Optuna study and MLflow (a real `mlflow server`)
hold each trial exactly once, each epoch once; ASHA stops the trials an uninterrupted sweep stops.
A killed driver may have started a trial in the seconds before Ray Tune last saved its state: Tune
does not know it on resume, and it is marked `lost` (Optuna FAIL, MLflow KILLED) instead of staying
RUNNING forever. Ctrl-C on either trial path (tuning/sweep/trial_path.py): the fast one, and Ray Train's public API
(the sweep and its resume).
"""

from __future__ import annotations

import signal

import optuna
import pytest
from optuna.trial import TrialState

from tests.cli import run_cli
from tests.processes import process_tree, wait_gone
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import (
    SPACE,
    STRAIGHT_THROUGH,
    decisions,
    ledger,
    start_after_first_trial,
    state_listed,
    write_space,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("stop", "path"), [(signal.SIGINT, "fast"), (signal.SIGKILL, "fast"),
                                            (signal.SIGINT, "public")], ids=["SIGINT-fast", "SIGKILL-fast",
                                                                             "SIGINT-public"])
def test_a_sweep_whose_driver_is_stopped_mid_sweep_is_finished_by_resume(stop, path, bars, tmp_path, mlflow_server):
    # Ctrl-C: the space of the session's sweep (tests/conftest.py) up to its initial points, one trial at a time,
    # so ASHA's decisions can be compared with that uninterrupted run's (STRAIGHT_THROUGH, which
    # tests/tuning/sweep/test_session.py checks against that sweep). Killed: 3 trials, 2 at once.
    trials = len(SPACE["initial"])
    space = (write_space(tmp_path, trials=trials, resources={"max_concurrent": 1, "trial_path": path})
             if stop == signal.SIGINT
             else write_space(tmp_path, trials=trials, initial=SPACE["initial"][:1], resources={"trial_path": path}))
    storage = tmp_path / "sweeps"
    process = start_after_first_trial("--data", bars, "--space", space, "--storage", storage,
                                      "--tracking-uri", mlflow_server.url)
    ray_processes = process_tree(process.pid)[1:]  # the local Ray the driver started
    assert state_listed(storage) == f"running (pid {process.pid})"
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=300)
    assert not wait_gone(ray_processes, timeout_s=120)  # they end with their driver, even a killed one
    if stop == signal.SIGINT:
        assert process.returncode == 130, stderr[-3000:]
        assert stderr.strip().splitlines()[-1].startswith("interrupted with ") and "mamba-tune resume t" in stderr
    else:
        assert process.returncode == -signal.SIGKILL
    before = ledger(storage / "t")
    assert 1 <= len(before) < trials
    assert state_listed(storage) == "interrupted"  # a killed driver's driver.json names a process that is gone
    checkpoints = {k: sorted(p.name for p in (storage / "t" / "train" / k).glob("checkpoint_*")) for k in before}

    resumed = run_cli("resume", "t", "--storage", storage)  # logs to the sweep's own server (sweep.json)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"\ntrial path: {path} " in resumed.stdout  # the sweep's own, from sweep.json
    after = ledger(storage / "t")
    assert len(after) == trials and all(after[k] == record for k, record in before.items())  # finished ones kept
    now = {k: sorted(p.name for p in (storage / "t" / "train" / k).glob("checkpoint_*")) for k in before}
    assert now == checkpoints, (before, after)  # and not run again
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    lost = [t for t in study.trials if t.user_attrs.get("stop_reason") == "lost"]
    kept = [t for t in study.trials if t not in lost]
    assert sorted(t.user_attrs["ray_trial_id"] for t in kept) == sorted(after)  # each trial once
    assert all(t.state == TrialState.FAIL for t in lost) and all(t.state != TrialState.RUNNING for t in kept)
    assert not lost or stop == signal.SIGKILL  # only a killed driver can lose a trial Ray Tune had not saved

    if stop == signal.SIGINT:  # ASHA's rungs came back with the resume: the same stops as straight through
        assert decisions(after, SPACE["initial"]) == STRAIGHT_THROUGH  # (the initial points: TPE's may differ)

    again = run_cli("resume", "t", "--storage", storage)
    assert again.returncode == 0 and "nothing to resume" in again.stdout
    assert state_listed(storage) == "finished"
    assert_sweep_logged(mlflow_server.url, "t", after, tmp_path, lost_allowed=stop == signal.SIGKILL)  # each once
