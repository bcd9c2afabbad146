"""`mamba-tune list --storage URI`: the sweeps whose records are copied in a URI storage (record_copies.py).

Each is summarised from this machine's folder when it keeps the sweep of that storage (it alone knows
a live driver), else from the storage's copy of its records. The copy cannot tell a sweep another head
is running from one whose head was lost: a sweep not finished there is STORED, and `resume` continues it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import pyarrow.fs

from tuning.errors import UsageError
from tuning.sweep.listing import INTERRUPTED, SweepSummary, summarise
from tuning.sweep.record_copies import fetch_file
from tuning.sweep_files import LEDGER, MANIFEST, TEST_LOOK, SweepPaths, sweep_paths, valid_name

STORED = "not finished (stored)"  # running on another head, or interrupted: the copy cannot tell which


def stored_sweeps(storage: str) -> list[str]:
    """The names of the sweeps with records in the URI storage (<storage>/NAME/sweep.json), sorted.

    Raises UsageError when the storage cannot be read."""
    try:
        fs, root = pyarrow.fs.FileSystem.from_uri(storage)
        folders = fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True))
        manifests = fs.get_file_info([f"{info.path}/{MANIFEST}" for info in folders
                                      if info.type == pyarrow.fs.FileType.Directory])
    except (OSError, ValueError) as exc:  # pyarrow's ArrowIOError and ArrowInvalid derive from these
        raise UsageError(f"--storage {storage}: cannot list its sweeps ({str(exc).splitlines()[0]}); check the URI "
                         "and the credentials in the environment or the node's instance profile") from None
    names = (info.path.rsplit("/", 2)[-2] for info in manifests if info.type == pyarrow.fs.FileType.File)
    return sorted(name for name in names if valid_name(name))  # a folder no sweep could be named is not one


def summarise_stored(storage: str, name: str) -> SweepSummary:
    """Sweep `name` of the URI storage as `list` shows it; raises what `summarise` raises, and OSError."""
    paths = sweep_paths(storage, name)
    if _kept_here(paths):
        return summarise(paths.folder)
    fs, root = pyarrow.fs.FileSystem.from_uri(paths.sweep_storage)
    with tempfile.TemporaryDirectory(prefix="mamba-tune-list-") as copy:
        for record in (MANIFEST, LEDGER, TEST_LOOK):
            fetch_file(fs, f"{root}/{record}", Path(copy) / record)
        summary = summarise(Path(copy))
    return replace(summary, state=STORED) if summary.state == INTERRUPTED else summary


def _kept_here(paths: SweepPaths) -> bool:
    """This machine's folder holds this storage's sweep (not another one of the same name)."""
    try:
        return json.loads((paths.folder / MANIFEST).read_text()).get("ray_storage") == paths.ray_storage
    except (OSError, ValueError, AttributeError):
        return False
