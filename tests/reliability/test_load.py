"""Load: 64 tiny trials with every core busy; each trial is accounted for once in Ray, Optuna and MLflow.

Ray Train starts two processes per trial (its synchronization actor and the worker; Tune's actors and the
hosts of Train's controllers are reused, one relay serves the sweep), so this is minutes of start-ups: it is not part of
`make test`; `make test-load` runs it, and CI (.ci/run) runs every tier.
"""

from __future__ import annotations

import optuna
import pytest
from ray._private.utils import get_num_cpus
from ray.tune import ExperimentAnalysis

from tests.cli import run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import ledger, write_space
from tuning.search.searcher import STATES

pytestmark = [pytest.mark.integration, pytest.mark.load]
TRIALS = 64
# Tiny trials of 2 epochs, ASHA's rung and the gate (10% better than E0) at epoch 1. The first trial
# there that passes the gate is alone on the rung and completes; lr 3e-3 passes it with a wide margin
# (bench/training_outcomes.py), and TPE samples many learning rates near it.
LOAD_SPACE = {"initial": [], "scheduler": {"max_epochs": 2, "grace_period": 1}, "gate": {"epoch": 1},
              "resources": {"workers": 1, "cpus_per_worker": 1},
              "run": {"model": {"d_model": 8, "n_layers": 1, "d_state": 8, "headdim": 8, "chunk_size": 16}}}


@pytest.mark.timeout(2400)
def test_64_tiny_trials_with_every_core_busy_are_each_accounted_for_once(bars, tmp_path, mlflow_server):
    cores = get_num_cpus()  # as the local Ray counts them (CPU affinity and cgroup quotas included)
    space = write_space(tmp_path, **LOAD_SPACE)
    storage = tmp_path / "sweeps"
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--trials", str(TRIALS),
               "--tracking-uri", mlflow_server.url, timeout=2300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{TRIALS} trials, {cores} trial(s) at once, each 1 worker(s) of 1 CPU" in done.stdout

    records = ledger(storage / "t")  # the sweep's own record
    assert len(records) == TRIALS and all(r["stop_reason"] != "error" for r in records.values())
    assert {r["stop_reason"] for r in records.values()} >= {"completed", "asha"}  # the scheduler was at work

    tune = ExperimentAnalysis(str(storage / "t" / "tune"))  # Ray Tune's saved experiment
    assert sorted(t.trial_id for t in tune.trials) == sorted(records)
    assert all(t.status == "TERMINATED" for t in tune.trials)
    assert sorted(p.name for p in (storage / "t" / "train").iterdir()) == sorted(records)  # Ray Train's runs

    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    assert len(study.trials) == TRIALS  # each once, ended as the ledger says
    assert {t.user_attrs["ray_trial_id"]: t.state for t in study.trials} == {
        trial: STATES[r["stop_reason"]] for trial, r in records.items()}

    assert_sweep_logged(mlflow_server.url, "t", records, tmp_path)  # one MLflow run per trial, each epoch once
