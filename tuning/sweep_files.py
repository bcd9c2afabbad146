"""The names of a sweep's folder and files, without importing Ray (the CLI's --help needs them)."""

import os
from pathlib import Path

DEFAULT_STORAGE = "runs/sweeps"  # sweeps live in <storage>/<name>/
MANIFEST = "sweep.json"  # what was asked: data, space, trials
LEDGER = "trials.json"  # every finished trial and why it ended
STUDY = "optuna.db"  # the Optuna study
TUNE_DIR = "tune"  # Ray Tune's experiment, beside our files
TRACKING_STAGING = "tracking"  # files on their way to MLflow, removed once sent
TRACKING_SPOOL = "tracking-pending.jsonl"  # MLflow writes not yet sent, replayed by `resume`
TEST_LOOK = "test.json"  # the winner scored on the test segment, once (tuning/sweep/one_look.py)
DRIVER = "driver.json"  # the process driving the sweep now (tuning/sweep/driver_mark.py)
RAY_LOG = "ray.log"  # Ray's own messages, kept out of the progress lines (tuning/cli/ray_output.py)


def is_uri(storage: str) -> bool:
    """s3://bucket/sweeps and the like (a filesystem every node reaches), as opposed to a folder path."""
    return "://" in storage


def unwritable_reason(folder: Path) -> str | None:
    """Why `folder` cannot be created or written here, or None; it is not created."""
    existing = folder.expanduser().resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):  # permissions, or a read-only file system (even for root)
        return f"{existing} is not writable (permissions or a read-only file system)"
    return None

