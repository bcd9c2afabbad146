"""The driver's view of a trial's latest Ray Train checkpoint: its epoch history and its best.pt.

A result's `checkpoint_path` names the checkpoint folder in the sweep's storage: a local path,
or a path inside the storage's filesystem (s3://bucket/... gives bucket/...).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs

from tuning.sweep_files import is_uri
from tuning.trainable import HISTORY


def storage_filesystem(storage: str) -> pyarrow.fs.FileSystem:
    """The filesystem of the sweep's storage (a path or a URI such as s3://bucket/sweeps)."""
    if is_uri(storage):
        return pyarrow.fs.FileSystem.from_uri(storage)[0]
    return pyarrow.fs.LocalFileSystem()


def read_history(fs: pyarrow.fs.FileSystem, checkpoint: str | None) -> list[dict[str, Any]]:
    """Every epoch the checkpoint holds (epoch 0 first); [] when there is none."""
    if checkpoint is None:
        return []
    try:
        with fs.open_input_stream(f"{checkpoint}/{HISTORY}") as stream:
            return json.loads(stream.read())
    except (FileNotFoundError, OSError):
        return []


def copy_file(fs: pyarrow.fs.FileSystem, checkpoint: str | None, name: str, dest: Path) -> Path | None:
    """Copy checkpoint/name to `dest`; None when the checkpoint or the file is missing."""
    if checkpoint is None:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with fs.open_input_stream(f"{checkpoint}/{name}") as stream, open(dest, "wb") as out:
            shutil.copyfileobj(stream, out)
    except (FileNotFoundError, OSError):
        dest.unlink(missing_ok=True)
        return None
    return dest


def staged_best(staging: Path, trial_id: str) -> Path:
    """Where the best.pt of a trial's ledger record waits for MLflow (the sweep's staging folder).

    The ledger's writer copies it there before it writes the record, from the checkpoint the trial
    stopped on; tracking uploads that copy and removes it once sent. So the file MLflow gets is the
    one the record speaks of, even when the trial wrote newer checkpoints before it was killed and
    Ray Train has since deleted the one it stopped on (a driver killed between the two, resumed).
    """
    return staging / trial_id / "best.pt"


def final_checkpoint(fs: pyarrow.fs.FileSystem, named: str | None, train_storage: str, trial_id: str,
                     stop_epoch: int) -> tuple[str | None, list[dict[str, Any]]]:
    """The checkpoint a trial ended on and its history up to `stop_epoch`; (None, []) when none is left.

    `named` is the checkpoint its last result named. Ray Train may have replaced it since: a trial
    stopped by the scheduler runs on until its actor is killed, and Train keeps only the newest
    checkpoints. Then the newest one kept that goes no further than `stop_epoch` is taken (or the
    oldest one kept, cut to `stop_epoch`); a resumed trial with nothing left to run names none.
    """
    candidates = [named] if named else []
    candidates += [c for c in reversed(_checkpoints(fs, train_storage, trial_id)) if c != named]
    readable = [(c, h) for c in candidates if (h := read_history(fs, c))]
    if not readable:
        return None, []
    checkpoint, history = next(((c, h) for c, h in readable if h[-1]["epoch"] <= stop_epoch), readable[-1])
    return checkpoint, [m for m in history if m["epoch"] <= stop_epoch]


def _checkpoints(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str) -> list[str]:
    """The checkpoint folders Ray Train kept for a trial, oldest first (their names sort by time)."""
    base = train_storage.split("://", 1)[1] if is_uri(train_storage) else train_storage
    try:
        entries = fs.get_file_info(pyarrow.fs.FileSelector(f"{base.rstrip('/')}/{trial_id}"))
    except (FileNotFoundError, OSError):
        return []
    return sorted(e.path for e in entries if e.type == pyarrow.fs.FileType.Directory
                  and e.base_name.startswith("checkpoint_"))
