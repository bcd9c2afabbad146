"""A copy of a sweep's records (tuning/sweep/record_copies.py) made while the sweep's tracking thread sends: a staged
file and the spool it lists, gone between the copy's listing and its upload, were sent to MLflow. The copy takes
them as sent, as a replay of the spool does, and is whole; before, it stopped there and said in a progress line
that it could not copy the records (one every few trials of a sweep on a cluster)."""

from __future__ import annotations

import json
from pathlib import Path

from tuning.sweep import record_copies
from tuning.sweep.record_copies import FOLDERS, GENERATION, copy_records
from tuning.sweep_files import LEDGER, MANIFEST, TRACKING_SPOOL, TRACKING_STAGING, SweepPaths


def stage(paths: SweepPaths, trial: str) -> Path:
    """A file of `trial` staged for MLflow, and its write in the spool."""
    staged = paths.folder / TRACKING_STAGING / trial / "loss_curve.png"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"png")
    with open(paths.folder / TRACKING_SPOOL, "a") as spool:
        spool.write(json.dumps({"op": "artifact", "key": trial, "path": str(staged), "folder": None,
                                "remove": True}) + "\n")
    return staged


def test_files_sent_while_the_records_are_copied_are_taken_as_sent(tmp_path, monkeypatch):
    bucket = tmp_path / "bucket"
    paths = SweepPaths("k", tmp_path / "head" / "runs" / "sweeps" / "k", f"file://{bucket}")
    paths.folder.mkdir(parents=True)
    (paths.folder / MANIFEST).write_text('{"name": "k"}')
    (paths.folder / LEDGER).write_text("[]")
    stage(paths, "t1")
    copy_records(paths)  # generation 1: the spool and t1's file are copied, not yet sent
    (paths.folder / LEDGER).write_text('[{"trial_id": "t1"}]')  # t2 ended: the next copy
    stage(paths, "t2")

    listed = record_copies._staged_files

    def sent_once_listed(folder: Path) -> dict[str, Path]:
        found = listed(folder)
        for staged in found.values():  # the tracking thread sends each write and removes its file...
            staged.unlink()
        (folder / TRACKING_SPOOL).unlink()  # ...and the spool, now empty
        return found

    monkeypatch.setattr(record_copies, "_staged_files", sent_once_listed)
    copy_records(paths)

    copy = bucket / "k"
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == {
        MANIFEST, LEDGER, FOLDERS, GENERATION}  # nothing left to send, no empty object
    assert (copy / LEDGER).read_text() == '[{"trial_id": "t1"}]'
    assert (copy / GENERATION).read_text() == (paths.folder / GENERATION).read_text()  # whole: generation 2
    assert json.loads((copy / GENERATION).read_text())["generation"] == 2
