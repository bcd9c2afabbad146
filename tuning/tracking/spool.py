"""The spool: a sweep's MLflow writes not yet sent, one JSON line each, in order (a write-ahead log).

Every write is appended before it is queued and the file is emptied whenever the queue is. After
a crash, or a sweep that ended while the store was down, the next TrackingLog of the same sweep
(`mamba-tune resume`) sends what it holds first.
"""

from __future__ import annotations

import json
from pathlib import Path

from model.atomic import write_text_atomic
from tuning.sweep_files import TRACKING_STAGING
from tuning.tracking.ops import LogArtifact, Operation, operation_from_json, to_json


class Spool:
    """The spool at `path`; the files its writes may upload lie in the folder TRACKING_STAGING beside it.

    A line that names a file anywhere else is not replayed (`refused` counts them): whoever can write the
    spool could otherwise make `resume` upload any file it can read, and delete it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.staging = path.parent / TRACKING_STAGING
        self.refused = 0  # lines of the last read() that named a file outside the staging folder

    def append(self, op: Operation) -> None:
        """Add `op` at the end (before it is queued: a crash from then on loses nothing)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as spool:
            spool.write(json.dumps(to_json(op)) + "\n")

    def read(self) -> list[Operation]:
        """The writes it holds; a last line cut short by a crash is left out."""
        if not self.path.exists():
            return []
        ops, self.refused = [], 0
        for line in self.path.read_text().splitlines():
            try:
                op = operation_from_json(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
            if isinstance(op, LogArtifact) and not self.staged(Path(op.path)):
                self.refused += 1
                continue
            ops.append(op)
        return ops

    def staged(self, path: Path) -> bool:
        """Whether `path` lies inside the staging folder (links and '..' resolved first)."""
        return path.resolve().is_relative_to(self.staging.resolve())

    def keep_only(self, ops: list[Operation]) -> None:
        """Hold exactly `ops` (the writes left unsent); remove the file when there are none."""
        if ops:
            write_text_atomic(self.path, "".join(json.dumps(to_json(op)) + "\n" for op in ops))
        else:
            self.clear()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
