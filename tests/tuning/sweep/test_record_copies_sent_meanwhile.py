"""A copy of a sweep's records (tuning/sweep/record_copies.py) made while the sweep's tracking thread runs.

A staged file gone between the copy's listing and its upload was sent to MLflow: the copy takes it as sent, as a
replay of the spool does, and is whole (before, it stopped there and said in a progress line that it could not copy
the records: one every few trials of a sweep on a cluster). A file staged while the copy runs, whose line is in the
spool the copy sends, goes up with it: else a head lost before the next copy would replay that line, find no file,
take it as sent, and the artifact would be lost."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def sweep_with_one_copy(tmp_path: Path) -> SweepPaths:
    """A sweep whose records were copied once (t1's file and its spool line), then t2 ended: the next copy is due."""
    paths = SweepPaths("k", tmp_path / "head" / "runs" / "sweeps" / "k", f"file://{tmp_path / 'bucket'}")
    paths.folder.mkdir(parents=True)
    (paths.folder / MANIFEST).write_text('{"name": "k"}')
    (paths.folder / LEDGER).write_text("[]")
    stage(paths, "t1")
    copy_records(paths)  # generation 1: the spool and t1's file are copied, not yet sent
    (paths.folder / LEDGER).write_text('[{"trial_id": "t1"}]')
    stage(paths, "t2")
    return paths


def on_listing(monkeypatch, number: int, meanwhile: Callable[[Path, dict[str, Path]], None]) -> None:
    """The copy's `number`-th listing of the staged files (1: the first) is followed by `meanwhile(folder, found)`:
    what the tracking thread does then."""
    listed, listings = record_copies._staged_files, []

    def listing(folder: Path) -> dict[str, Path]:
        found = listed(folder)
        listings.append(found)
        if len(listings) == number:
            meanwhile(folder, found)
        return found

    monkeypatch.setattr(record_copies, "_staged_files", listing)


def test_files_sent_while_the_records_are_copied_are_taken_as_sent(tmp_path, monkeypatch):
    paths = sweep_with_one_copy(tmp_path)

    def sent(folder: Path, found: dict[str, Path]) -> None:
        for staged in found.values():  # the tracking thread sends each write and removes its file, then the spool
            staged.unlink()
        (folder / TRACKING_SPOOL).unlink()

    on_listing(monkeypatch, 2, sent)  # the listing the uploads go by
    copy_records(paths)

    copy = tmp_path / "bucket" / "k"
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == {
        MANIFEST, LEDGER, FOLDERS, GENERATION, TRACKING_SPOOL}  # no staged file left, no empty object; the spool's
    # lines name files gone, which a replay takes as sent
    assert (copy / LEDGER).read_text() == '[{"trial_id": "t1"}]'
    assert (copy / GENERATION).read_text() == (paths.folder / GENERATION).read_text()  # whole: generation 2
    assert json.loads((copy / GENERATION).read_text())["generation"] == 2


def test_a_file_staged_while_the_records_are_copied_goes_up_with_the_spool_that_names_it(tmp_path, monkeypatch):
    paths = sweep_with_one_copy(tmp_path)
    on_listing(monkeypatch, 1, lambda folder, found: stage(paths, "t3"))  # t3 ends before the spool is sent
    copy_records(paths)

    copy = tmp_path / "bucket" / "k"
    assert '"key": "t3"' in (copy / TRACKING_SPOOL).read_text()
    assert (copy / TRACKING_STAGING / "t3" / "loss_curve.png").read_bytes() == b"png"  # the file its line names
