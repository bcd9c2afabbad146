"""A trial's files in the sweep's train storage, as the driver and the trial's workers see them.

    train/<trial id>/checkpoint_<time>/   Ray Train's checkpoints (last.pt, best.pt, history.json);
                                          Train keeps the newest two
    train/<trial id>/best/epoch_<k>.pt    the best.pt of each epoch k that improved on the best so far:
                                          Train never deletes these, the driver does once it has staged
                                          the one the trial's ledger record names
The ledger's search records, and the checkpoints' histories of the trials it does not hold yet, tell
how far each search trial got (SweepCurves): the scheduler of a resumed or extended sweep rebuilds
its rungs from them (a warm-started sweep's, from the trials its warm start added to the study too).

A result's `checkpoint_path` names the checkpoint folder in the sweep's storage: a local path,
or a path inside the storage's filesystem (s3://bucket/... gives bucket/...).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs

from tuning.search.curves import RecordedCurve
from tuning.search.finalists import SEARCH
from tuning.search.ledger import Ledger, TrialRecord
from tuning.sweep.record_copies import moved_folder
from tuning.sweep_files import is_uri

HISTORY = "history.json"  # every epoch reported so far: the driver reads it, not the .pt files
BEST_SNAPSHOTS = "best"


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
    return None if checkpoint is None else _copy(fs, f"{checkpoint}/{name}", dest)


def stage_best(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str, best_epoch: int,
               checkpoint: str | None, dest: Path) -> Path | None:
    """Copy the best.pt of a trial's record (its best epoch's snapshot) to `dest`; None when there is none.

    A sweep started before snapshots existed has none: the checkpoint's best.pt stands in for it.
    """
    staged = _copy(fs, best_snapshot(train_storage, trial_id, best_epoch), dest)
    return staged if staged is not None else copy_file(fs, checkpoint, "best.pt", dest)


def stage_record_best(fs: pyarrow.fs.FileSystem, train_storage: str, record: TrialRecord, dest: Path) -> Path | None:
    """Copy the best.pt of a finished trial's record to `dest` (stage_best from the checkpoint it ended on);
    None when there is none."""
    checkpoint, _ = final_checkpoint(fs, None, train_storage, record.trial_id, record.stop_epoch)
    return stage_best(fs, train_storage, record.trial_id, record.best_epoch, checkpoint, dest)


def _copy(fs: pyarrow.fs.FileSystem, path: str, dest: Path) -> Path | None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with fs.open_input_stream(path) as stream, open(dest, "wb") as out:
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


def best_snapshot(train_storage: str, trial_id: str, epoch: int) -> str:
    """The path, inside the storage's filesystem, of a trial's best.pt as it was saved at `epoch`.

    A trial the scheduler stops runs on until its actor is killed: it may improve and write newer
    checkpoints, and Ray Train deletes the one it stopped on. Its record's best epoch stays here.
    """
    return f"{_trial_folder(train_storage, trial_id)}/{BEST_SNAPSHOTS}/epoch_{epoch}.pt"


def save_best_snapshot(fs: pyarrow.fs.FileSystem, best: Path, train_storage: str, trial_id: str, epoch: int) -> None:
    """Copy a worker's best.pt of `epoch` to its snapshot path (written whole, then moved into place)."""
    path = best_snapshot(train_storage, trial_id, epoch)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with open(best, "rb") as source, fs.open_output_stream(f"{path}.partial") as out:
        shutil.copyfileobj(source, out)
    fs.move(f"{path}.partial", path)


def prune_best_snapshots(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str, before_epoch: int) -> None:
    """Delete the snapshots of epochs before `before_epoch` (a result the driver has taken bettered them)."""
    for epoch, path in _snapshots(fs, train_storage, trial_id):
        if epoch < before_epoch:
            _delete_quietly(fs, path)


def remove_best_snapshots(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str) -> None:
    """Delete a trial's snapshot folder (its record's best.pt has been staged)."""
    try:
        fs.delete_dir(f"{_trial_folder(train_storage, trial_id)}/{BEST_SNAPSHOTS}")
    except (FileNotFoundError, OSError):
        pass


def final_checkpoint(fs: pyarrow.fs.FileSystem, named: str | None, train_storage: str, trial_id: str,
                     stop_epoch: int) -> tuple[str | None, list[dict[str, Any]]]:
    """The checkpoint a trial ended on and its history up to `stop_epoch`; (None, []) when none is left.

    `named` is the checkpoint its last result named. Ray Train may have replaced it since: a trial
    stopped by the scheduler runs on until its actor is killed, and Train keeps only the newest
    checkpoints. Then the newest one kept that goes no further than `stop_epoch` is taken (or the
    oldest one kept, cut to `stop_epoch`: its history is right, its best.pt may not be, which is why
    the record's best.pt comes from the snapshots); a resumed trial with nothing left to run names none.
    """
    candidates = [named] if named else []
    candidates += [c for c in reversed(_checkpoints(fs, train_storage, trial_id)) if c != named]
    readable = [(c, h) for c in candidates if (h := read_history(fs, c))]
    if not readable:
        return None, []
    checkpoint, history = next(((c, h) for c, h in readable if h[-1]["epoch"] <= stop_epoch), readable[-1])
    return checkpoint, [m for m in history if m["epoch"] <= stop_epoch]


@dataclass(frozen=True)
class SweepCurves:
    """How far a sweep's search trials got: each Tune experiment's scheduler rebuilds its rungs from it
    (tuning/search/scheduler.py's CurveSource). Pickles (Tune saves it with the scheduler).

    recorded: the search trials in the ledger, each its record's validation curve up to the epoch it stopped
    at; and, in a sweep warm-started on the same bars, the other sweep's trials added to its study (prior knowledge
    the rule compares with, as Optuna's sampler does: tuning/sweep/warm_start.py's warm_curves, under ids no Ray
    trial has; they are never in the ledger, so never in the leaderboard, the finalists or the winner). A
    confirmation run (stage confirm: a finalist trained again, with another seed or on another fold)
    never met the search's rungs, so it is left out, as is any record of a fold other than the validation one.
    unrecorded: a trial the ledger does not hold, as far as its newest checkpoint's history goes. The scheduler
    asks it only of the trials Tune re-adds to a restored experiment (one that was running when the sweep was
    interrupted), so no other folder in train/ is read (an interrupted confirmation run's); nor is a trial's
    that the ledger holds, at any stage: its record speaks for it.
    """

    ledger_path: Path
    storage: str  # the sweep storage's root (a path or a URI): its filesystem
    train_storage: str  # Ray Train's storage of the sweep's trials

    def recorded(self) -> dict[str, RecordedCurve]:
        from tuning.sweep.warm_start import warm_curves

        ledger = {k: RecordedCurve(r.val_curve, r.stop_epoch) for k, r in Ledger(self.ledger_path).records.items()
                  if r.stage == SEARCH and r.fold == 1}  # fold 1: the validation segment
        return {**warm_curves(self.ledger_path.parent), **ledger}

    def unrecorded(self, trial_id: str) -> RecordedCurve | None:
        if trial_id in Ledger(self.ledger_path).records:
            return None
        fs = storage_filesystem(self.storage)
        _, history = final_checkpoint(fs, None, self.train_storage, trial_id, stop_epoch=10**9)
        if not history:
            return None
        return RecordedCurve(tuple(m["val_loss"] for m in history), int(history[-1]["epoch"]))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled with Ray Tune's state, maybe saved by another head: the ledger is in this one's folder."""
        ledger = state["ledger_path"]
        object.__setattr__(self, "__dict__", {**state, "ledger_path": moved_folder(ledger.parent) / ledger.name})


def _trial_folder(train_storage: str, trial_id: str) -> str:
    return f"{_storage_path(train_storage)}/{trial_id}"


def _storage_path(storage: str) -> str:
    """A storage's path inside its filesystem (s3://bucket/sweeps gives bucket/sweeps)."""
    return (storage.split("://", 1)[1] if is_uri(storage) else storage).rstrip("/")


def _checkpoints(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str) -> list[str]:
    """The checkpoint folders Ray Train kept for a trial, oldest first (their names sort by time)."""
    return sorted(e.path for e in _entries(fs, _trial_folder(train_storage, trial_id))
                  if e.type == pyarrow.fs.FileType.Directory and e.base_name.startswith("checkpoint_"))


def _snapshots(fs: pyarrow.fs.FileSystem, train_storage: str, trial_id: str) -> list[tuple[int, str]]:
    """(epoch, path) of each best.pt snapshot a trial has written."""
    found = []
    for entry in _entries(fs, f"{_trial_folder(train_storage, trial_id)}/{BEST_SNAPSHOTS}"):
        stem = entry.base_name.removeprefix("epoch_").removesuffix(".pt")
        if entry.type == pyarrow.fs.FileType.File and entry.base_name.endswith(".pt") and stem.isdigit():
            found.append((int(stem), entry.path))
    return found


def _entries(fs: pyarrow.fs.FileSystem, folder: str) -> list[pyarrow.fs.FileInfo]:
    try:
        return fs.get_file_info(pyarrow.fs.FileSelector(folder))
    except (FileNotFoundError, OSError):
        return []


def _delete_quietly(fs: pyarrow.fs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except (FileNotFoundError, OSError):
        pass
