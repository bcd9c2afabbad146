"""The sweep's looks at the test segment kept the moment test.json holds them (tuning/sweep/one_look.py takes
them): logged to MLflow and copied to the storage before anything else the sweep's end does, so a failure after
the look loses none of it. `resume` calls it too, every time: each look MLflow lacks is logged then, those it has
are skipped (tuning/tracking/ops.py), and MLflow ends up with test.json's looks, test_looks their count.
"""

from __future__ import annotations

from tuning.sweep.record_copies import copy_records_or_note
from tuning.sweep_files import SweepPaths, read_test_looks
from tuning.tracking.log import TrackingLog
from tuning.tracking.runs import log_test_look

LOOK_SENT_S = 30.0  # how long a look waits for MLflow to take it before the sweep's end goes on (kept in the spool)


def keep_looks(paths: SweepPaths, log: TrackingLog, failure: str | None = None) -> None:
    """Every look test.json holds (and `failure`, why the last one failed) logged to MLflow, test.json and the
    spool copied to the storage, then the writes sent, waiting at most LOOK_SENT_S (while the store does not
    answer, not at all: they wait in the spool, which `resume` sends). Nothing without a look or a failure."""
    looks = read_test_looks(paths.folder)
    if not looks and failure is None:
        return
    log_test_look(log, looks, failure)
    copy_records_or_note(paths)
    if log.down_since is None:
        log.flush(LOOK_SENT_S)
