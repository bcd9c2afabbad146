"""The spool: a sweep's MLflow writes not yet sent, one JSON line each, in order (a write-ahead log).

Every write is appended before it is queued and the file is emptied whenever the queue is. After
a crash, or a sweep that ended while the store was down, the next TrackingLog of the same sweep
(`mamba-tune resume`) sends what it holds first.
"""

from __future__ import annotations

import json
from pathlib import Path

from model.atomic import write_text_atomic
from tuning.tracking.ops import Operation, operation_from_json, to_json


class Spool:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, op: Operation) -> None:
        """Add `op` at the end (before it is queued: a crash from then on loses nothing)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as spool:
            spool.write(json.dumps(to_json(op)) + "\n")

    def read(self) -> list[Operation]:
        """The writes it holds; a last line cut short by a crash is left out."""
        if not self.path.exists():
            return []
        ops = []
        for line in self.path.read_text().splitlines():
            try:
                ops.append(operation_from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        return ops

    def keep_only(self, ops: list[Operation]) -> None:
        """Hold exactly `ops` (the writes left unsent); remove the file when there are none."""
        if ops:
            write_text_atomic(self.path, "".join(json.dumps(to_json(op)) + "\n" for op in ops))
        else:
            self.clear()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
