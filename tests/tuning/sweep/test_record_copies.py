"""The copy of a sweep's records in a URI storage (tuning/sweep/record_copies.py), on file:// URIs: what a lost
head leaves there, and what another head fetches from it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tuning.errors import UsageError
from tuning.progress import LOGGER, Note, event_of
from tuning.sweep import record_copies
from tuning.sweep.record_copies import FOLDERS, copy_records, copy_records_or_note, fetch_records, follow_move
from tuning.sweep.trial_files import SweepCurves
from tuning.sweep_files import LEDGER, MANIFEST, TEST_LOOK, TRACKING_SPOOL, TRACKING_STAGING, SweepPaths


@pytest.fixture(autouse=True)
def no_moves(monkeypatch):
    monkeypatch.setattr(record_copies, "MOVED", {})


def head(tmp_path: Path, which: str, storage: str) -> SweepPaths:
    return SweepPaths("k", tmp_path / which / "runs" / "sweeps" / "k", storage)


def spool_line(path: Path) -> str:
    return json.dumps({"op": "artifact", "key": "t1", "path": str(path), "folder": None, "remove": True}) + "\n"


def a_sweep_folder(paths: SweepPaths) -> None:
    """The records a head keeps: manifest, ledger, a spool whose upload waits in the staging folder."""
    staged = paths.folder / TRACKING_STAGING / "t1" / "best.pt"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"weights")
    (paths.folder / MANIFEST).write_text('{"name": "k"}')
    (paths.folder / LEDGER).write_text("[]")
    (paths.folder / TRACKING_SPOOL).write_text(spool_line(staged))


def test_another_head_fetches_the_records_and_their_uploads_point_at_its_own_folder(tmp_path):
    storage = f"file://{tmp_path / 'bucket'}"
    lost, new = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(lost)
    copy_records(lost)

    assert fetch_records(new)
    for name in (MANIFEST, LEDGER):
        assert (new.folder / name).read_text() == (lost.folder / name).read_text()
    staged = new.folder / TRACKING_STAGING / "t1" / "best.pt"
    assert staged.read_bytes() == b"weights"
    assert (new.folder / TRACKING_SPOOL).read_text() == spool_line(staged)  # uploads from this head's staging
    assert json.loads((new.folder / FOLDERS).read_text()) == [str(lost.folder), str(new.folder)]
    assert not fetch_records(new)  # its folder holds the sweep now: nothing is fetched over it


def test_the_copy_follows_the_folder_sent_writes_and_files_leave_it(tmp_path):
    bucket = tmp_path / "bucket"
    paths = head(tmp_path, "a", f"file://{bucket}")
    a_sweep_folder(paths)
    copy_records(paths)
    copy = bucket / "k"
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == {
        MANIFEST, LEDGER, TRACKING_SPOOL, FOLDERS, f"{TRACKING_STAGING}/t1/best.pt"}

    (paths.folder / TRACKING_SPOOL).unlink()  # every write sent: the spool and the staged file are gone
    (paths.folder / TRACKING_STAGING / "t1" / "best.pt").unlink()
    (paths.folder / LEDGER).write_text('[{"trial_id": "t1"}]')
    (paths.folder / TEST_LOOK).write_text("{}")
    copy_records(paths)
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == {
        MANIFEST, LEDGER, TEST_LOOK, FOLDERS}
    assert (copy / LEDGER).read_text() == '[{"trial_id": "t1"}]'


def test_a_folder_storage_holds_the_sweep_folder_itself_and_gets_no_copy(tmp_path):
    paths = SweepPaths("k", tmp_path / "shared" / "k", str(tmp_path / "shared"))
    a_sweep_folder(paths)
    before = sorted(p for p in (tmp_path / "shared").rglob("*"))
    copy_records(paths)
    assert not fetch_records(SweepPaths("k", tmp_path / "other" / "k", str(tmp_path / "shared")))
    assert sorted(p for p in (tmp_path / "shared").rglob("*")) == before and not (tmp_path / "other").exists()


def test_a_storage_without_a_copy_gives_nothing_and_one_that_cannot_be_read_says_so(tmp_path):
    assert not fetch_records(head(tmp_path, "b", f"file://{tmp_path / 'empty'}"))
    with pytest.raises(UsageError, match=r"--storage nosuchfs://bucket/sweeps: cannot fetch sweep 'k''s records "):
        fetch_records(head(tmp_path, "b", "nosuchfs://bucket/sweeps"))


def test_a_copy_that_fails_is_said_and_the_sweep_goes_on(tmp_path, caplog):
    (tmp_path / "file").write_text("not a folder")
    paths = head(tmp_path, "a", f"file://{tmp_path / 'file'}/sweeps")
    a_sweep_folder(paths)
    with caplog.at_level("INFO", logger=LOGGER):
        copy_records_or_note(paths)
    notes = [e.text for r in caplog.records if isinstance(e := event_of(r), Note)]
    assert len(notes) == 1 and notes[0].startswith("storage: could not copy sweep k's records to file://"), notes


def test_what_ray_tune_pickled_on_the_lost_head_reads_this_heads_ledger(tmp_path):
    storage = f"file://{tmp_path / 'bucket'}"
    lost, new = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(lost)
    copy_records(lost)
    pickled = pickle.dumps(SweepCurves(lost.folder / LEDGER, storage, f"{storage}/k/train"))
    fetch_records(new)
    follow_move(new)
    assert pickle.loads(pickled).ledger_path == new.folder / LEDGER
