"""A copy of a sweep's records in its storage, so that a sweep on a URI storage outlives the head that drove it.

With a URI storage (s3://bucket/sweeps), the sweep's folder is on the head's own disk (runs/sweeps/NAME), lost
with the head, while its checkpoints and Ray Tune's state are in the storage. So the records `resume` needs
are copied beside them, in <storage>/<name>/, each time they change (the manifest written, a trial ended,
the sweep stopped):
  sweep.json, trials.json, test.json   the manifest, the ledger, the one look at the test segment
  tracking-pending.jsonl, tracking/    MLflow writes not yet sent, and the files they upload
  folders.json                         the head folders the sweep has been kept in, the newest last
  generation.json                      which copy the records are: its number, a token, the folder it came from
`mamba-tune resume NAME --storage URI` (or `best`) on a machine whose folder lacks sweep.json fetches them
first. Objects pickled with Ray Tune's state name the folder of the head that saved them: `moved_folder`
maps each earlier folder to this one (trial_lifecycle.SweepCallback and trial_files.SweepCurves consult it).
With a folder storage (a shared file system) the sweep's folder is in the storage already: nothing is copied.

A stale copy never replaces newer records. Each copy is one generation newer than the storage's copy it replaces
(generation.json, here and there; a fetch takes the storage's), and a head copies only when the storage's copy is
the generation its folder holds (or the one before: its own last copy, cut short). A folder left behind by an
earlier head or resume, older than the storage's copy, is refused (StaleCopy) before anything is written, here or
there; `resume` and `best` refuse it at once (fetch_records), and moved aside, the newer copy is fetched instead.
Whatever the copy, sweep.json, trials.json, test.json and folders.json are never deleted from the storage (only
the spool, once sent, and the staged files it has sent leave it). Two heads copying the same sweep at the same
instant are not told apart (an object store has no lock): one sweep is driven by one head at a time.

Nothing reaches outside what the sweep owns: before the first write, upload, delete or download, every staged file
is checked to be in the sweep's folder (a link to anything outside it is refused) and every listed key to be a
plain path under the sweep's prefix (an S3 key is any string: '..', '.', an empty or absolute part are refused).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs

from model.atomic import write_text_atomic
from tuning.errors import UsageError
from tuning.progress import Note, publish
from tuning.sweep_files import LEDGER, MANIFEST, TEST_LOOK, TRACKING_SPOOL, TRACKING_STAGING, SweepPaths, is_uri

RECORDS = (MANIFEST, LEDGER, TEST_LOOK, TRACKING_SPOOL)
FOLDERS = "folders.json"  # ["/old/head/runs/sweeps/k", "/this/head/runs/sweeps/k"]
GENERATION = "generation.json"  # {"generation": 7, "copy": "9f86d081884c7d65", "folder": "/this/head/runs/sweeps/k"}

MOVED: dict[str, Path] = {}  # a folder an earlier head kept the sweep in -> where this one keeps it


class OutsideSweep(ValueError):
    """A staged file or a listed key that would reach outside the sweep's folder or prefix: nothing was copied."""


class StaleCopy(ValueError):
    """The storage's copy of the records is newer than this folder's (another head, a later resume): nothing was
    copied."""


@dataclass(frozen=True)
class Generation:
    """Which copy a sweep's records are: the nth, made by the copy holding token `copy`, from head folder `folder`."""

    number: int = 0  # 0: no copy counted yet (none made, or made before copies were counted)
    copy: str = ""  # random, one per copy: two heads that made the same number are told apart
    folder: str = ""  # the head folder it was copied from, for the line that refuses a stale one

    @classmethod
    def parse(cls, text: str | None, where: str) -> Generation:
        """The generation that generation.json's `text` holds (None: no file, generation 0); ValueError if not one."""
        if text is None:
            return cls()
        try:
            values = json.loads(text)
            return cls(int(values["generation"]), str(values["copy"]), str(values.get("folder", "")))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{where} is not a generation record ({exc!r}); restore it or remove it") from None

    def to_json(self) -> str:
        return json.dumps({"generation": self.number, "copy": self.copy, "folder": self.folder})

    def same(self, other: Generation) -> bool:
        return (self.number, self.copy) == (other.number, other.copy)


def moved_folder(folder: Path) -> Path:
    """Where this machine keeps the sweep an earlier head kept in `folder` (itself when it never moved)."""
    return MOVED.get(str(folder), folder)


def copy_records(paths: SweepPaths) -> None:
    """Bring the storage's copy of the records up to date (nothing with a folder storage).

    Raises OSError, OutsideSweep (nothing written) for a link here or a key there outside the sweep's own, and
    StaleCopy (nothing written) when the storage's copy is newer than this folder's records."""
    if not is_uri(paths.ray_storage):
        return
    fs, root = pyarrow.fs.FileSystem.from_uri(paths.sweep_storage)
    remote = f"{root}/{TRACKING_STAGING}"
    for name in (*RECORDS, FOLDERS, GENERATION):
        _refuse_link_outside(paths.folder, paths.folder / name)
    here = _staged_files(paths.folder)
    there = {_key_below(remote, info.path): info for info in
             fs.get_file_info(pyarrow.fs.FileSelector(remote, allow_not_found=True, recursive=True))
             if info.type == pyarrow.fs.FileType.File}
    held, stored = _generations(paths, fs, root)
    _refuse_stale(paths, held, stored)
    folders = paths.folder / FOLDERS
    if not folders.exists():
        write_text_atomic(folders, json.dumps([str(paths.folder)]))
    copy = Generation(stored.number + 1, secrets.token_hex(8), str(paths.folder))  # copies cut short count once
    write_text_atomic(paths.folder / GENERATION, copy.to_json())  # first: cut short, this folder is still newer
    made: set[str] = set()  # the folders made by this copy's uploads: each is made once
    for name in (*RECORDS, FOLDERS):
        _mirror_file(fs, paths.folder / name, f"{root}/{name}", made)
    # Listed again now that the spool is up: a file staged (and its spool line written) since the first listing is
    # named by the spool just sent, so it must go up with it; else a head lost before the next copy would take its
    # spool line, replayed, for a file sent, and the artifact would be lost.
    here = _staged_files(paths.folder)
    sent = set()  # staged files sent and removed since they were listed: the tracking thread runs on
    for name, local in here.items():
        try:
            if name not in there or there[name].size != local.stat().st_size:  # a staged file never changes
                _put(fs, local, f"{remote}/{name}", made)
        except FileNotFoundError:  # a replay of its spool line finds it gone and takes it as sent (tracking/ops.py
            if local.exists():  # LogArtifact), and so does the copy; the storage's side missing is an error
                raise
            sent.add(name)
    for name in there.keys() - (here.keys() - sent):  # sent to MLflow and removed here
        fs.delete_file(f"{remote}/{name}")
    _put(fs, paths.folder / GENERATION, f"{root}/{GENERATION}", made)  # last: the copy is whole


def copy_records_or_note(paths: SweepPaths) -> None:
    """copy_records, a failure said in a progress line: the sweep goes on, and the next copy catches up (one that
    would reach outside the sweep's own is refused by every copy until what the line names is removed)."""
    try:
        copy_records(paths)
    except OutsideSweep as exc:
        publish(Note(f"storage: did not copy sweep {paths.name}'s records to {paths.sweep_storage}: {exc}; the "
                     "sweep goes on, uncopied until then"))
    except StaleCopy as exc:
        publish(Note(f"storage: did not copy sweep {paths.name}'s records to {paths.sweep_storage}: {exc}; the "
                     "sweep goes on here, uncopied"))
    except (OSError, ValueError) as exc:  # pyarrow's ArrowIOError and ArrowInvalid derive from these
        publish(Note(f"storage: could not copy sweep {paths.name}'s records to {paths.sweep_storage} "
                     f"({str(exc).splitlines()[0]}); the sweep goes on, and its next copy catches up"))


def fetch_records(paths: SweepPaths) -> bool:
    """Fetch the records of a sweep whose folder is not here from the storage's copy; True when there was one.

    The spool's uploads are pointed at this folder's staging, and the folder is added to folders.json.
    Raises UsageError when the storage cannot be read, or (nothing written) when a listed key is not a plain path
    under the sweep's prefix or a folder here links outside the sweep's folder, or when the folder is here and the
    storage's copy is newer than its records (a stale folder: StaleCopy's line)."""
    if not is_uri(paths.ray_storage):
        return False
    if (paths.folder / MANIFEST).exists():
        refuse_stale_folder(paths)
        return False
    try:
        fs, root = pyarrow.fs.FileSystem.from_uri(paths.sweep_storage)
        if fs.get_file_info(f"{root}/{MANIFEST}").type != pyarrow.fs.FileType.File:
            return False
        remote, staging = f"{root}/{TRACKING_STAGING}", paths.folder / TRACKING_STAGING
        staged = {f"{remote}/{name}": staging / name for name in (
            _key_below(remote, info.path) for info in
            fs.get_file_info(pyarrow.fs.FileSelector(remote, allow_not_found=True, recursive=True))
            if info.type == pyarrow.fs.FileType.File)}
        for local in {staging, *(folder for path in staged.values() for folder in path.parents
                                 if folder.is_relative_to(staging))}:  # each folder on the way to each file
            _refuse_link_outside(paths.folder, local)
        paths.folder.mkdir(parents=True, exist_ok=True)
        for name in (GENERATION, FOLDERS, *RECORDS[1:]):  # the manifest last: its presence says the records are here
            fetch_file(fs, f"{root}/{name}", paths.folder / name)
        for key, local in staged.items():
            fetch_file(fs, key, local)
        fetch_file(fs, f"{root}/{MANIFEST}", paths.folder / MANIFEST)
    except OutsideSweep as exc:
        raise UsageError(f"--storage {paths.ray_storage}: cannot fetch sweep {paths.name!r}'s records: {exc}") \
            from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowIOError and ArrowInvalid derive from these
        raise UsageError(f"--storage {paths.ray_storage}: cannot fetch sweep {paths.name!r}'s records from "
                         f"{paths.sweep_storage} ({str(exc).splitlines()[0]}); check the URI and the credentials in "
                         "the environment or the node's instance profile") from None
    earlier = earlier_folders(paths)
    _repoint_spool(paths.folder / TRACKING_SPOOL, earlier, paths.folder)
    write_text_atomic(paths.folder / FOLDERS, json.dumps([*map(str, earlier), str(paths.folder)]))
    return True


def refuse_stale_folder(paths: SweepPaths) -> None:
    """UsageError, StaleCopy's line, when the storage's copy of the records is newer than this folder's (nothing
    with a folder storage); UsageError too when the storage cannot be read."""
    if not is_uri(paths.ray_storage):
        return
    try:
        fs, root = pyarrow.fs.FileSystem.from_uri(paths.sweep_storage)
        _refuse_stale(paths, *_generations(paths, fs, root))
    except StaleCopy as exc:
        raise UsageError(str(exc)) from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowIOError and ArrowInvalid derive from these
        raise UsageError(f"--storage {paths.ray_storage}: cannot read sweep {paths.name!r}'s records' copy in "
                         f"{paths.sweep_storage} ({str(exc).splitlines()[0]}); check the URI and the credentials in "
                         "the environment or the node's instance profile") from None


def _generations(paths: SweepPaths, fs: pyarrow.fs.FileSystem, root: str) -> tuple[Generation, Generation]:
    """The generation this folder's records are, and the storage's copy's (0 for a missing generation.json)."""
    local, remote = paths.folder / GENERATION, f"{root}/{GENERATION}"
    held = Generation.parse(local.read_text() if local.exists() else None, str(local))
    if fs.get_file_info(remote).type != pyarrow.fs.FileType.File:
        return held, Generation()
    with fs.open_input_stream(remote) as source:
        return held, Generation.parse(source.read().decode(), f"{paths.sweep_storage}/{GENERATION}")


def _refuse_stale(paths: SweepPaths, held: Generation, stored: Generation) -> None:
    """StaleCopy unless the storage's copy is the generation this folder holds, or older (its own copy cut short)."""
    if stored.number < held.number or stored.same(held):
        return
    which = "a newer" if stored.number > held.number else "another"
    source = f" (copied from {stored.folder})" if stored.folder else ""
    raise StaleCopy(f"sweep {paths.name!r}'s records in {paths.folder} are generation {held.number}, and its copy in "
                    f"{paths.sweep_storage} is {which} generation {stored.number}{source}; a stale folder never "
                    f"replaces newer records: move {paths.folder} aside and run the command again, which fetches "
                    "the newer copy")


def earlier_folders(paths: SweepPaths) -> list[Path]:
    """The folders other heads kept the sweep in, oldest first (from folders.json; [] for a sweep never moved)."""
    path = paths.folder / FOLDERS
    listed = json.loads(path.read_text()) if path.exists() else []
    return [Path(folder) for folder in listed if Path(folder) != paths.folder]


def follow_move(paths: SweepPaths) -> None:
    """Objects Ray Tune unpickles from now on that name an earlier head's folder use this one."""
    MOVED.update({str(folder): paths.folder for folder in earlier_folders(paths)})


def _repoint_spool(spool: Path, earlier: list[Path], folder: Path) -> None:
    """Spool lines that upload a file from an earlier folder's staging upload it from this folder's."""
    if not spool.exists() or not earlier:
        return
    lines = []
    for line in spool.read_text().splitlines():
        try:
            values = json.loads(line)
        except json.JSONDecodeError:
            continue  # cut short by a crash: the spool leaves it out anyway
        path = values.get("path") if isinstance(values, dict) else None
        for old in earlier:
            if isinstance(path, str) and Path(path).is_relative_to(old / TRACKING_STAGING):
                values["path"] = str(folder / Path(path).relative_to(old))
        lines.append(json.dumps(values) + "\n")
    write_text_atomic(spool, "".join(lines))


def _staged_files(folder: Path) -> dict[str, Path]:
    """The files of `folder`'s staging by their key below it; OutsideSweep for a link (file or folder, which the
    walk does not follow) that resolves outside `folder`."""
    staging = folder / TRACKING_STAGING
    _refuse_link_outside(folder, staging)
    found = {}
    for top, dirs, files in os.walk(staging):
        for name in (*dirs, *files):
            _refuse_link_outside(folder, Path(top) / name)
        found.update({(Path(top) / name).relative_to(staging).as_posix(): Path(top) / name for name in files
                      if (Path(top) / name).is_file()})
    return found


def _refuse_link_outside(folder: Path, path: Path) -> None:
    """OutsideSweep when `path`, a link, resolves outside `folder` (a link inside it, or no link, is fine)."""
    if path.is_symlink() and not path.resolve().is_relative_to(folder.resolve()):
        raise OutsideSweep(f"{path.relative_to(folder).as_posix()} links to {path.resolve()}, outside the sweep's "
                           f"folder {folder}: remove the link")


def _key_below(prefix: str, key: str) -> str:
    """`key`'s part below `prefix`/, or OutsideSweep when it is no plain relative path: a '..', '.' or empty part
    (an absolute path included) would name something else on a file system, or outside the sweep's folder here."""
    name = key[len(prefix) + 1:] if key.startswith(f"{prefix}/") else ""
    if not name or any(part in ("", ".", "..") for part in name.split("/")):
        raise OutsideSweep(f"the storage lists {key!r}, not a plain key under {prefix}/ (no '..', '.' or empty part): "
                           "remove that object from the storage")
    return name


def _mirror_file(fs: pyarrow.fs.FileSystem, local: Path, remote: str, made: set[str]) -> None:
    """Upload `local`; when it is gone (the spool, emptied by the tracking thread, may go while it is copied),
    delete the spool's copy (every write it held was sent), never another's: the manifest, the ledger, the looks and
    the folders only ever grow."""
    try:
        _put(fs, local, remote, made)
    except FileNotFoundError:
        if local.exists():  # the storage's side is missing: an error
            raise
        if local.name == TRACKING_SPOOL and fs.get_file_info(remote).type == pyarrow.fs.FileType.File:
            fs.delete_file(remote)


def _put(fs: pyarrow.fs.FileSystem, local: Path, remote: str, made: set[str]) -> None:
    """Upload `local` to `remote`, making its folder first unless `made` holds it (S3: each make is a request)."""
    data = local.read_bytes()  # first: a file gone since it was listed (FileNotFoundError) leaves no empty object
    folder = remote.rpartition("/")[0]
    if folder not in made:
        fs.create_dir(folder, recursive=True)
        made.add(folder)
    with fs.open_output_stream(remote) as out:  # one object, written whole (S3: one PUT)
        out.write(data)


def fetch_file(fs: pyarrow.fs.FileSystem, remote: str, local: Path) -> None:
    """Download `remote` to `local`, whole or not at all (through a .part file); nothing when it is no file."""
    if fs.get_file_info(remote).type != pyarrow.fs.FileType.File:
        return
    with fs.open_input_stream(remote) as source:
        local.parent.mkdir(parents=True, exist_ok=True)
        local.with_name(local.name + ".part").write_bytes(source.read())
    local.with_name(local.name + ".part").replace(local)
