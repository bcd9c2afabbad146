"""Sweeps in tests: a small space that shows every way a trial ends (run it with tests/cli.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from tests.cli import ROOT, cli_command, cli_env, run_cli
from tuning.sweep_files import LEDGER, MANIFEST

# Built to show every way a trial ends: the initial points run first, in order. The first
# learns well; the second's learning rate is too small to get 10% better than E0 by the gate
# at epoch 2; the third is mediocre and reaches ASHA's rung at epoch 2 after the first.
# Each outcome holds with a margin no CPU difference crosses (bench/training_outcomes.py, the
# same to 6 digits under the native, avx2 and default kernels): val/E0 at the gate 0.55 (first),
# 1.00 (second) and 0.79 (third) against 0.9; the third's best val at the rung 1.44x the first's.
# The inputs are the bar features alone, without HAR to correct (residual_to: none): the outcomes
# were measured that way, and a model that starts at HAR has no E0 to get 10% better than by epoch 2.
SPACE = {
    "name": "t", "trials": 5, "seed": 0,
    "search": {"learning_rate": {"low": 1e-7, "high": 1e-2, "log": True},
               "weight_decay": {"low": 1e-5, "high": 1e-1, "log": True}, "batch_size": {"choices": [64, 128]}},
    "initial": [{"learning_rate": 3e-3, "weight_decay": 1e-2, "batch_size": 64},
                {"learning_rate": 1e-7, "weight_decay": 1e-2, "batch_size": 64},
                {"learning_rate": 1e-3, "weight_decay": 1e-2, "batch_size": 128}],
    "scheduler": {"max_epochs": 4, "grace_period": 2, "reduction_factor": 2},
    "gate": {"epoch": 2, "ratio_to_e0": 0.9},
    "resources": {"workers": 1, "cpus_per_worker": 1},
    "run": {"data": {"window": 16, "horizon": 4, "vol_lookbacks": [], "residual_to": "none"}, "model": {"d_model": 16, "n_layers": 1, "d_state": 16,
                                                            "headdim": 8, "chunk_size": 16}},
}

# How SPACE's initial points end (stop reason, epoch) in its sweep run straight through, one trial at a time
# (the session's finished_sweep): the first completes, the gate stops the second, ASHA the third at its rung.
STRAIGHT_THROUGH = [("completed", 4), ("gate", 2), ("asha", 2)]


def decisions(records: dict[str, dict], points: list[dict]) -> list[tuple[str, int]]:
    """How the trials of these parameters ended (stop reason, epoch), in the order of `points`."""
    by_params = {json.dumps(r["params"], sort_keys=True): (r["stop_reason"], r["stop_epoch"]) for r in records.values()
                 if r["stage"] == "search"}  # (the session's sweep also confirms its finalist)
    return [by_params[json.dumps(p, sort_keys=True)] for p in points]


def space_values(**changes) -> dict:
    """SPACE with some sections changed: a dict merges into its section, anything else replaces it."""
    values = json.loads(json.dumps(SPACE))
    for section, value in changes.items():
        values[section] = {**values.get(section, {}), **value} if isinstance(value, dict) else value
    return values


def write_space(folder: Path, **changes) -> Path:
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump(space_values(**changes)))
    return path


def ledger(folder: Path) -> dict[str, dict]:
    return {r["trial_id"]: r for r in json.loads((folder / "trials.json").read_text())}


def start_after_first_trial(*args: str, timeout_s: float = 600) -> subprocess.Popen:
    """`mamba-tune sweep ARGS` (with --storage) in the background, returned once its first trial has ended."""
    storage = Path(args[list(args).index("--storage") + 1])
    process = subprocess.Popen(cli_command("sweep", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT, env=cli_env())
    deadline = time.monotonic() + timeout_s
    while not (storage / "t" / LEDGER).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return process



def copy_sweep(finished_sweep: tuple, dest: Path) -> tuple[Path, str]:
    """A copy of the session's finished sweep (tests/conftest.py) in `dest`, its storage and its MLflow store, its
    manifest pointing at the copies: a test may break it. -> (the copy's storage, its tracking URI)."""
    _, storage, uri, _ = finished_sweep
    shutil.copytree(storage, dest / "sweeps")
    (dest / "mlflow").mkdir()
    shutil.copyfile(uri.removeprefix("sqlite:///"), dest / "mlflow" / "mlflow.db")
    copied_uri = f"sqlite:///{dest / 'mlflow' / 'mlflow.db'}"
    manifest = json.loads((dest / "sweeps" / "t" / MANIFEST).read_text())
    manifest.update(ray_storage=str(dest / "sweeps"), tracking_uri=copied_uri)
    (dest / "sweeps" / "t" / MANIFEST).write_text(json.dumps(manifest))
    return dest / "sweeps", copied_uri


def state_listed(storage: Path) -> str:
    """The state `mamba-tune list` gives sweep t."""
    done = run_cli("list", "--storage", storage)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("t "))
    return row[21:45].strip()


def sweep_run(uri: str, name: str = "t"):
    """The sweep's parent run in the MLflow store at `uri`."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name(name).experiment_id], "tags.`mamba_tune.role` = 'sweep'")
    return run
