"""Which bars file a sweep was tuned on, by content: its SHA-256, rows and first and last bar.

A sweep's manifest keeps it (`bars`), and best.yaml's `tuned:` section keeps the hash, so that its winner is
registered, ensembled or refitted only with the very file it was tuned on: a file of the same name with other
bars, or the same path rewritten since, is refused. A copy under another name is the same file. The file may be an
object in a store, s3:// or gs:// (model/bars_location.py): its hash is of the object's bytes.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from model.bars_location import bars_location, is_remote, open_bytes, require_object
from tuning.errors import UsageError

CHUNK = 1 << 20


def sha256_of(path: str | Path) -> str:
    """The file's (or object's) SHA-256, hex, read in chunks (a multi-GB file is never held whole)."""
    digest = hashlib.sha256()
    with open_bytes(bars_location(path)) as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def bars_identity(path: str | Path, summary: dict[str, Any]) -> dict[str, Any]:
    """{sha256, rows, first_bar, last_bar} of the bars file at `path`, whose data summary (model/data.py) is
    `summary`; the bars' times as ISO strings, UTC."""
    return {"sha256": sha256_of(path), "rows": summary["n_bars"], "first_bar": _iso(summary["first_bar_ns"]),
            "last_bar": _iso(summary["last_bar_ns"])}


def require_same_bars(path: str | Path, sha256: str | None, what: str, fix: str) -> None:
    """Raise UsageError unless the file at `path` has the content `sha256` (None: recorded by a version that kept
    no hash, nothing to compare). `what` names what was tuned on the recorded file; `fix`, what to do instead."""
    if sha256 is None:
        return
    path = bars_location(path)
    if is_remote(path):
        require_object(path)  # a missing object, or refused credentials, said as such
    elif not path.is_file():
        raise UsageError(f"{path}: no such file; {what} was tuned on bars with SHA-256 {sha256[:16]}, {fix}")
    found = sha256_of(path)
    if found != sha256:
        raise UsageError(f"{path} has SHA-256 {found[:16]}, and {what} was tuned on bars with SHA-256 {sha256[:16]}: "
                         f"another file, or this one changed since; {fix}")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds")
