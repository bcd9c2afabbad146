"""The copy of a sweep's records in a URI storage (tuning/sweep/record_copies.py), on file:// URIs: what a lost
head leaves there, and what another head fetches from it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow
import pyarrow.fs
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


class ListsMore:
    """A file:// storage whose listings also name `extra` objects, read from memory: an S3 key is any string,
    '..' and '//' included, which a local file system cannot hold."""

    def __init__(self, fs: pyarrow.fs.FileSystem, extra: dict[str, bytes]):
        self.fs, self.extra = fs, extra

    def get_file_info(self, what):
        if isinstance(what, pyarrow.fs.FileSelector):
            return [*self.fs.get_file_info(what), *(pyarrow.fs.FileInfo(key, pyarrow.fs.FileType.File, size=len(data))
                                                   for key, data in self.extra.items()
                                                   if key.startswith(f"{what.base_dir}/"))]
        if what in self.extra:
            return pyarrow.fs.FileInfo(what, pyarrow.fs.FileType.File, size=len(self.extra[what]))
        return self.fs.get_file_info(what)

    def open_input_stream(self, path: str):
        return pyarrow.BufferReader(self.extra[path]) if path in self.extra else self.fs.open_input_stream(path)

    def __getattr__(self, name: str):
        return getattr(self.fs, name)  # writes and deletes reach the real file system


@pytest.fixture()
def storage_lists(monkeypatch):
    """storage_lists({key: bytes}): from now on the storage's listings also name these keys."""
    real = pyarrow.fs.FileSystem

    def add(extra: dict[str, bytes]) -> None:
        class Storage:
            @staticmethod
            def from_uri(uri: str):
                fs, root = real.from_uri(uri)
                return ListsMore(fs, extra), root
        monkeypatch.setattr(pyarrow.fs, "FileSystem", Storage)
    return add


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


@pytest.mark.parametrize("link", ["file", "folder"])
def test_copy_records_refuses_a_staged_link_to_outside_the_sweep_and_copies_nothing(link, tmp_path, caplog):
    bucket, outside = tmp_path / "bucket", tmp_path / "outside"
    (outside / "ssh").mkdir(parents=True)
    (outside / "ssh" / "id_ed25519").write_text("not the sweep's")
    paths = head(tmp_path, "a", f"file://{bucket}")
    a_sweep_folder(paths)
    target = outside / "ssh" if link == "folder" else outside / "ssh" / "id_ed25519"
    (paths.folder / TRACKING_STAGING / "t1" / "more").symlink_to(target)
    with pytest.raises(ValueError, match=rf"^{TRACKING_STAGING}/t1/more links to {target}, outside the sweep's "
                                         rf"folder {paths.folder}: remove the link$"):
        copy_records(paths)
    assert not bucket.exists() and not (paths.folder / FOLDERS).exists()  # nothing written, here or there

    with caplog.at_level("INFO", logger=LOGGER):
        copy_records_or_note(paths)
    notes = [e.text for r in caplog.records if isinstance(e := event_of(r), Note)]
    assert notes == [f"storage: did not copy sweep k's records to file://{bucket}/k: {TRACKING_STAGING}/t1/more "
                     f"links to {target}, outside the sweep's folder {paths.folder}: remove the link; the sweep goes "
                     "on, uncopied until then"]
    assert not bucket.exists()


def test_copy_records_refuses_a_record_that_links_outside_the_sweep(tmp_path):
    bucket = tmp_path / "bucket"
    paths = head(tmp_path, "a", f"file://{bucket}")
    a_sweep_folder(paths)
    (tmp_path / "credentials").write_text("not the sweep's")
    (paths.folder / LEDGER).unlink()
    (paths.folder / LEDGER).symlink_to(tmp_path / "credentials")
    with pytest.raises(ValueError, match=rf"^{LEDGER} links to {tmp_path / 'credentials'}, outside the sweep's folder"):
        copy_records(paths)
    assert not bucket.exists()


def test_copy_records_refuses_a_listed_key_outside_the_sweeps_prefix_and_deletes_nothing(tmp_path, storage_lists):
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "other-sweep.json").write_text("another sweep's")
    paths = head(tmp_path, "a", f"file://{bucket}")
    a_sweep_folder(paths)
    key = f"{bucket}/k/{TRACKING_STAGING}/../../other-sweep.json"  # the copy would delete it: not staged here
    storage_lists({key: b"another sweep's"})
    with pytest.raises(ValueError, match=r"the storage lists '.*/k/tracking/\.\./\.\./other-sweep\.json', not a "
                                         r"plain key under .*/k/tracking/ \(no '\.\.', '\.' or empty part\): "
                                         r"remove that object from the storage$"):
        copy_records(paths)
    assert [p.name for p in bucket.iterdir()] == ["other-sweep.json"] and not (paths.folder / FOLDERS).exists()


@pytest.mark.parametrize("listed", ["../../../escaped", "ABSOLUTE", "t1//x", "t1/./x"])
def test_fetch_records_refuses_a_listed_key_that_is_not_plain_and_writes_nothing(listed, tmp_path, storage_lists):
    storage = f"file://{tmp_path / 'bucket'}"
    lost, new = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(lost)
    copy_records(lost)
    key = f"{tmp_path}/bucket/k/{TRACKING_STAGING}/{listed.replace('ABSOLUTE', str(tmp_path / 'escaped'))}"
    storage_lists({key: b"planted"})  # '..': <b's folder>/../../escaped; absolute: /tmp/.../escaped
    with pytest.raises(UsageError, match=rf"^--storage {storage}: cannot fetch sweep 'k''s records: the storage "
                                         r"lists '.*', not a plain key under .*/k/tracking/ \(no '\.\.', '\.' or "
                                         r"empty part\): remove that object from the storage$"):
        fetch_records(new)
    assert not (tmp_path / "b").exists() and not [p for p in tmp_path.rglob("escaped")]  # nothing written anywhere


@pytest.mark.parametrize("link", [TRACKING_STAGING, f"{TRACKING_STAGING}/t1"])
def test_fetch_records_refuses_a_staging_folder_here_that_links_outside(link, tmp_path):
    storage = f"file://{tmp_path / 'bucket'}"
    lost, new = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(lost)
    copy_records(lost)
    (tmp_path / "outside").mkdir()
    (new.folder / link).parent.mkdir(parents=True)
    (new.folder / link).symlink_to(tmp_path / "outside")  # left by someone: the staged files would land there
    with pytest.raises(UsageError, match=rf"^--storage {storage}: cannot fetch sweep 'k''s records: {link} links to "
                                         rf"{tmp_path / 'outside'}, outside the sweep's folder {new.folder}: remove "
                                         "the link$"):
        fetch_records(new)
    assert not any((tmp_path / "outside").iterdir()) and [p.name for p in new.folder.iterdir()] == [TRACKING_STAGING]
