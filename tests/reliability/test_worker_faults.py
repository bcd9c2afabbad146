"""A Ray Train worker killed mid-epoch (SIGKILL): the trial restarts from its last checkpoint and finishes.

Ray Train's FailureConfig restarts the worker group; the restarted worker resumes from the latest
checkpoint, so no epoch is trained or counted twice: not in Tune's results, not in the ledger,
not in MLflow. On either trial path (tuning/sweep/trial_path.py): the fast one, and Ray Train's public API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import ROOT, cli_command, cli_env
from tests.processes import process_tree
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, ledger, write_space

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("path", ["fast", "public"], ids=["fast", "public"])
def test_a_killed_worker_resumes_its_trial_from_the_last_checkpoint_counting_each_epoch_once(path, bars, tmp_path):
    storage = tmp_path / "sweeps"
    space = write_space(tmp_path, trials=1, initial=SPACE["initial"][:1], scheduler={"max_epochs": 40},
                        resources={"trial_path": path})
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    process = subprocess.Popen(cli_command("sweep", "--data", bars, "--space", space, "--storage", storage,
                                             "--tracking-uri", store),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:  # until a few epochs are checkpointed
        if any((storage / "t" / "train").glob("*/checkpoint_*")):
            break
        time.sleep(0.1)
    time.sleep(2)
    workers = [pid for pid in process_tree(process.pid)  # this sweep's own, not another's on the machine
               if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::RayTrainWorker")]
    assert workers, "no Ray Train worker to kill"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert f"\ntrial path: {path} " in stdout
    (record,) = ledger(storage / "t").values()
    assert (record["stop_reason"], record["stop_epoch"]) == ("completed", 40)
    result_file = next((storage / "t" / "tune").glob("run_trial_*/result.json"))
    epochs = [json.loads(line)["epoch"] for line in result_file.read_text().splitlines()]
    assert epochs[0] == 0 and epochs.count(0) == 1, epochs  # resumed from a checkpoint, not restarted
    assert epochs[-1] == 40 and sorted(set(epochs)) == list(range(41)), epochs
    assert len(record["val_curve"]) == 41  # the ledger's curve: each epoch once
    assert_sweep_logged(store, "t", {record["trial_id"]: record}, tmp_path)  # MLflow: each epoch once
