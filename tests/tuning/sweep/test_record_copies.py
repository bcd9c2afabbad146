"""The copy of a sweep's records in a URI storage (tuning/sweep/record_copies.py), on file:// URIs: what a lost
head leaves there, and what another head fetches from it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow
import pyarrow.fs
import pytest

from tuning.cli.main import main
from tuning.errors import UsageError
from tuning.progress import LOGGER, Note, event_of
from tuning.sweep import record_copies
from tuning.sweep.record_copies import (
    FOLDERS,
    GENERATION,
    StaleCopy,
    copy_records,
    copy_records_or_note,
    fetch_records,
    follow_move,
)
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
        MANIFEST, LEDGER, TRACKING_SPOOL, FOLDERS, GENERATION, f"{TRACKING_STAGING}/t1/best.pt"}

    (paths.folder / TRACKING_SPOOL).unlink()  # every write sent: the spool and the staged file are gone
    (paths.folder / TRACKING_STAGING / "t1" / "best.pt").unlink()
    (paths.folder / LEDGER).write_text('[{"trial_id": "t1"}]')
    (paths.folder / TEST_LOOK).write_text("{}")
    copy_records(paths)
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == {
        MANIFEST, LEDGER, TEST_LOOK, FOLDERS, GENERATION}
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


def test_a_folder_here_whose_storage_cannot_be_read_is_refused_not_taken_as_the_latest(tmp_path):
    paths = head(tmp_path, "a", "nosuchfs://bucket/sweeps")
    a_sweep_folder(paths)
    with pytest.raises(UsageError, match=r"^--storage nosuchfs://bucket/sweeps: cannot read sweep 'k''s records' copy "
                                         r"in nosuchfs://bucket/sweeps/k \("):
        fetch_records(paths)


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


# A stale copy never replaces newer records (generation.json): a head whose folder is older than the storage's copy
# (an earlier resume, another machine) is refused before it writes anything, and nothing is ever lost there.


def remote_files(storage: str) -> dict[str, bytes]:
    """Every object of sweep k's copy in `storage` (file:// or s3://), by its key below <storage>/k/."""
    fs, root = pyarrow.fs.FileSystem.from_uri(f"{storage}/k")
    infos = fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True, recursive=True))
    files = {}
    for info in infos:
        if info.type == pyarrow.fs.FileType.File:
            with fs.open_input_stream(info.path) as source:
                files[info.path[len(root) + 1:]] = source.read()
    return files


def generation_of(storage: str) -> int:
    return json.loads(remote_files(storage)[GENERATION])["generation"]


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def resumed_elsewhere(tmp_path: Path, storage: str) -> tuple[SweepPaths, SweepPaths]:
    """Head a copies the sweep (generation 1); head b fetches it, goes on (a trial ended, its look taken, the
    spool's write sent) and copies it (generation 2): a's folder is stale. -> (a, b)."""
    stale, latest = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(stale)
    copy_records(stale)
    assert fetch_records(latest)
    (latest.folder / LEDGER).write_text('[{"trial_id": "t1"}, {"trial_id": "t2"}]')
    (latest.folder / TEST_LOOK).write_text('[{"trial_id": "t2"}]')
    (latest.folder / TRACKING_SPOOL).unlink()
    (latest.folder / TRACKING_STAGING / "t1" / "best.pt").unlink()
    (latest.folder / TRACKING_STAGING / "t2" / "best.pt").parent.mkdir(parents=True)
    (latest.folder / TRACKING_STAGING / "t2" / "best.pt").write_bytes(b"t2's weights, not sent yet")
    copy_records(latest)
    return stale, latest


@pytest.fixture(params=["file", "s3"])
def storage(request, tmp_path, monkeypatch) -> str:
    """A URI storage: a file:// folder, or a bucket of a real S3-compatible server (tests/s3_server.py)."""
    if request.param == "file":
        return f"file://{tmp_path / 'bucket'}"
    from tests.s3_server import BUCKET

    server = request.getfixturevalue("s3_server")
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{BUCKET}/{tmp_path.name}"  # a prefix of its own: the server is the session's


@pytest.mark.parametrize("command", ["resume", "best"])
def test_a_command_on_a_stale_folder_is_refused_in_one_line_naming_both_generations(command, tmp_path, monkeypatch,
                                                                                   capsys):
    storage = f"file://{tmp_path / 'bucket'}"
    stale, latest = resumed_elsewhere(tmp_path, storage)
    there, here = remote_files(storage), folder_files(stale.folder)
    monkeypatch.chdir(tmp_path / "a")  # runs/sweeps/k here is a's folder

    assert main([command, "k", "--storage", storage]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: sweep 'k''s records in {stale.folder} are generation 1, and its copy in {storage}/k is a "
                   f"newer generation 2 (copied from {latest.folder}); a stale folder never replaces newer records: "
                   f"move {stale.folder} aside and run the command again, which fetches the newer copy\n"), err
    assert remote_files(storage) == there and folder_files(stale.folder) == here  # nothing written, there or here

    stale.folder.rename(stale.folder.with_name("k-stale"))  # the fix the line gives: the newer copy is fetched
    assert fetch_records(stale)
    for name in (LEDGER, TEST_LOOK, f"{TRACKING_STAGING}/t2/best.pt"):
        assert (stale.folder / name).read_bytes() == (latest.folder / name).read_bytes()
    assert not (stale.folder / TRACKING_STAGING / "t1").exists() and not (stale.folder / TRACKING_SPOOL).exists()


def test_a_stale_folder_never_replaces_nor_deletes_the_newer_copy(storage, tmp_path, caplog):
    stale, latest = resumed_elsewhere(tmp_path, storage)
    there = remote_files(storage)
    assert {LEDGER, TEST_LOOK, f"{TRACKING_STAGING}/t2/best.pt"} <= there.keys()
    (stale.folder / LEDGER).write_text('[{"trial_id": "t1"}, {"trial_id": "t3"}]')  # the stale head goes on anyway
    here = folder_files(stale.folder)

    with pytest.raises(StaleCopy, match=rf"^sweep 'k''s records in {stale.folder} are generation 1, and its copy in "
                                        rf"{storage}/k is a newer generation 2 \(copied from {latest.folder}\); a "
                                        "stale folder never replaces newer records: move "):
        copy_records(stale)
    with caplog.at_level("INFO", logger=LOGGER):
        copy_records_or_note(stale)
    notes = [e.text for r in caplog.records if isinstance(e := event_of(r), Note)]
    assert len(notes) == 1 and notes[0].startswith(f"storage: did not copy sweep k's records to {storage}/k: sweep "
                                                   "'k''s records in ") and notes[0].endswith(
        "; the sweep goes on here, uncopied"), notes
    assert remote_files(storage) == there and folder_files(stale.folder) == here  # the newer records all kept


def test_a_copy_cut_short_is_taken_up_by_its_own_head_and_never_by_another(tmp_path, monkeypatch, caplog):
    """A copy that fails midway leaves this folder one generation ahead of the storage: its own head's next copy
    goes on; a head that fetched the storage's copy meanwhile made that generation too, and is told apart."""
    storage = f"file://{tmp_path / 'bucket'}"
    a, b = head(tmp_path, "a", storage), head(tmp_path, "b", storage)
    a_sweep_folder(a)
    copy_records(a)
    real_put = record_copies._put

    def cut_short(fs, local, remote, made):
        raise OSError("connection reset")
    monkeypatch.setattr(record_copies, "_put", cut_short)
    copy_records_or_note(a)  # the storage stays at generation 1, a's folder says 2
    monkeypatch.setattr(record_copies, "_put", real_put)
    assert generation_of(storage) == 1 and json.loads((a.folder / GENERATION).read_text())["generation"] == 2
    copy_records(a)  # its own head: caught up
    assert generation_of(storage) == 2

    monkeypatch.setattr(record_copies, "_put", cut_short)
    copy_records_or_note(a)  # a's folder says 3, the storage 2
    monkeypatch.setattr(record_copies, "_put", real_put)
    assert fetch_records(b)
    copy_records(b)  # b's generation 3, from the storage's 2
    there = remote_files(storage)
    with pytest.raises(StaleCopy, match=rf"^sweep 'k''s records in {a.folder} are generation 3, and its copy in "
                                        rf"{storage}/k is another generation 3 \(copied from {b.folder}\); "):
        copy_records(a)
    assert remote_files(storage) == there


def test_test_json_and_trials_json_are_never_deleted_from_the_storage(tmp_path):
    storage = f"file://{tmp_path / 'bucket'}"
    paths = head(tmp_path, "a", storage)
    a_sweep_folder(paths)
    (paths.folder / TEST_LOOK).write_text('[{"trial_id": "t1"}]')
    copy_records(paths)
    for name in (TEST_LOOK, LEDGER, MANIFEST, TRACKING_SPOOL):  # gone from the folder (a user, a crash)
        (paths.folder / name).unlink()
    copy_records(paths)
    there = remote_files(storage)
    assert there[TEST_LOOK] == b'[{"trial_id": "t1"}]' and there[LEDGER] == b"[]" and MANIFEST in there
    assert TRACKING_SPOOL not in there  # the spool alone leaves the storage, once every write it held was sent


def test_a_resume_from_the_latest_folder_copies_and_deletes_what_it_sent(storage, tmp_path):
    stale, latest = resumed_elsewhere(tmp_path, storage)
    assert not fetch_records(latest)  # what resume and best do first: the latest folder is not refused
    (latest.folder / LEDGER).write_text('[{"trial_id": "t1"}, {"trial_id": "t2"}, {"trial_id": "t3"}]')
    (latest.folder / TRACKING_STAGING / "t2" / "best.pt").unlink()  # sent to MLflow
    copy_records(latest)
    there = remote_files(storage)
    assert there[LEDGER] == (latest.folder / LEDGER).read_bytes() and TEST_LOOK in there
    assert not [key for key in there if key.startswith(f"{TRACKING_STAGING}/")]
    assert generation_of(storage) == 3 and json.loads(there[GENERATION])["folder"] == str(latest.folder)
    assert (latest.folder / GENERATION).read_bytes() == there[GENERATION]
