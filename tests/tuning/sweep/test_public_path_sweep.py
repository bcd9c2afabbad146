"""A sweep end to end on Ray Train's public API alone (`resources.trial_path: public`, tuning/sweep/trial_path.py):
the same stop reasons, confirmation, look and MLflow runs as the session's sweep on the fast path, and the same
numbers, trial by trial (integration: a real local Ray)."""

from __future__ import annotations

import json

import pytest
import ray
import torch

from tests.cli import run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, STRAIGHT_THROUGH, decisions, ledger, write_space

pytestmark = pytest.mark.integration

TRIALS = 2  # SPACE's first two initial points, run first, in order: the fast sweep's first two trials


def same_run(record: dict) -> str:
    """What makes two records the same run: its stage, parameters, seed and fold."""
    return json.dumps([record["stage"], record["params"], record["seed"], record["fold"]], sort_keys=True)


def test_a_sweep_on_rays_public_api_ends_its_trials_as_the_fast_path_does_with_the_same_numbers(bars, finished_sweep,
                                                                                                  tmp_path):
    _, fast_storage, _, fast = finished_sweep
    assert f"trial path: fast (Ray {ray.__version__})" in fast.stdout.splitlines()  # auto, on this Ray
    storage, uri = tmp_path / "sweeps", f"sqlite:///{tmp_path / 'mlflow.db'}"
    space = write_space(tmp_path, trials=TRIALS, resources={"max_concurrent": 1, "gpus_per_trial": "auto"})
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri,
                   "--set", "resources.trial_path=public", "--set", "confirm.top_k=1", "--set", "confirm.seeds=[1]")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    stopping = next(i for i, line in enumerate(lines) if line.startswith("stopping: "))
    assert lines[stopping + 1] == f"trial path: public API (Ray {ray.__version__}: resources.trial_path is public)"

    records = ledger(storage / "t")
    search = {k: r for k, r in records.items() if r["stage"] == "search"}
    # completed, and stopped by the gate (as by ASHA: Tune stops it, the relay ends its run), as on the fast path
    assert decisions(search, SPACE["initial"][:TRIALS]) == STRAIGHT_THROUGH[:TRIALS]
    finalist = next(r for r in search.values() if r["stop_reason"] == "completed")
    (confirmed,) = [r for r in records.values() if r["stage"] == "confirm"]
    assert (confirmed["seed"], confirmed["fold"], confirmed["finalist"]) == (1, 1, finalist["trial_id"])
    assert (confirmed["stop_reason"], confirmed["stop_epoch"]) == ("completed", 4)
    assert f"best: trial {finalist['trial_id']} (the confirmed winner)" in done.stdout
    (look,) = json.loads((storage / "t" / "test.json").read_text())
    assert (look["trial_id"], look["look"], look["trials"]) == (finalist["trial_id"], 1, TRIALS)
    assert_sweep_logged(uri, "t", records, tmp_path)
    assert list((storage / "t" / "train" / finalist["trial_id"]).glob("checkpoint_*"))

    # The same runs on the fast path (the session's sweep): the same curves, epoch by epoch, and the same ends.
    on_fast = {same_run(r): r for r in ledger(fast_storage / "t").values()}
    compared = [r for r in records.values() if same_run(r) in on_fast]
    assert {r["trial_id"] for r in search.values()} <= {r["trial_id"] for r in compared}
    for record in compared:
        other = on_fast[same_run(record)]
        assert (record["stop_reason"], record["stop_epoch"], record["best_epoch"]) == (
            other["stop_reason"], other["stop_epoch"], other["best_epoch"]), record["params"]
        torch.testing.assert_close(torch.tensor(record["val_curve"], dtype=torch.float64),
                                   torch.tensor(other["val_curve"], dtype=torch.float64))
