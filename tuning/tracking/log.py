"""A sweep's MLflow writes, sent in order by one background thread; buffered while the store is down.

The sweep's driver enqueues writes (tuning/tracking/ops.py: runs, epochs, tags, artifacts, ends)
and goes on at once; training never waits for MLflow. A write that fails because the store does
not answer (no connection, a timeout, a 5xx, a locked database) is retried, with backoff up to
RETRY_MAX_S, until it succeeds: the writes behind it wait, in order. A write MLflow refuses for
good is reported and skipped. Every write goes to the spool (tuning/tracking/spool.py) before it
is queued; writes an earlier driver left there are sent first.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import requests
import sqlalchemy.exc
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException, RestException

from tuning.progress import Note, publish
from tuning.tracking.lineage import BarsInput
from tuning.tracking.ops import (
    KEY_TAG,
    SWEEP_KEY,
    SWEEP_TAG,
    EndLostRuns,
    EndRun,
    LogArtifact,
    LogInput,
    LogMetrics,
    Operation,
    SetTags,
    StartRun,
    SweepRuns,
)
from tuning.tracking.spool import Spool
from tuning.tracking.store import first_line

__all__ = ["SWEEP_KEY", "TrackingLog", "note"]
RETRY_MIN_S, RETRY_MAX_S = 1.0, 10.0
_RETRYABLE_CODES = {"INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED",
                    "SERVICE_UNDER_MAINTENANCE", "IO_ERROR", "ABORTED"}  # the server's 5xx/429 kinds


class TrackingLog:
    def __init__(self, client: MlflowClient, experiment_id: str, sweep_id: str, spool: Path) -> None:
        self.sweep_id = sweep_id
        self.runs = SweepRuns(client, experiment_id, sweep_id)
        self.spool = Spool(spool)
        self.queue: deque[Operation] = deque(self.spool.read())  # what an earlier driver left unsent: first
        self.busy = False  # an operation is being sent
        self.down_since: float | None = None  # the store stopped answering at (monotonic)
        self.sent_while_down = 0
        self.done = threading.Condition()
        self.stopping = False
        if self.spool.refused:
            note(f"tracking: left out {self.spool.refused} write(s) in {spool} that upload a file from outside "
                 f"{self.spool.staging}, where the sweep stages its files; a spool it did not write is not trusted")
        if self.queue:
            note(f"tracking: sending {len(self.queue)} write(s) saved in {spool} by an earlier run")
        self.thread = threading.Thread(target=self._serve, name="mamba-tune-tracking", daemon=True)
        self.thread.start()

    # -- what the sweep asks for (returns at once) ------------------------------------------
    def start_run(self, key: str, name: str, parent: str | None = None, tags: dict[str, Any] | None = None,
                  params: dict[str, Any] | None = None) -> None:
        """Find the run of `key` (reopened as RUNNING) or create it, nested under `parent`'s run."""
        self._put(StartRun(key, name, parent, {k: str(v) for k, v in (tags or {}).items()},
                           {k: str(v) for k, v in (params or {}).items()}))

    def log_epoch(self, key: str, step: int, metrics: dict[str, float], timestamp_ms: int | None = None) -> None:
        """Metrics at step `step` (the epoch); a step the run already holds is not logged again."""
        self._put(LogMetrics(key, int(step), {k: float(v) for k, v in metrics.items()},
                             timestamp_ms or int(time.time() * 1000)))

    def set_tags(self, key: str, tags: dict[str, Any]) -> None:
        self._put(SetTags(key, {k: str(v) for k, v in tags.items()}))

    def log_artifact(self, key: str, path: Path, folder: str | None = None, remove_after: bool = False) -> None:
        """Upload the file `path` into the run's artifacts (under `folder`); delete it once sent if asked."""
        self._put(LogArtifact(key, str(path), folder, remove_after))

    def log_input(self, key: str, bars: BarsInput, context: str = "training") -> None:
        """The bars the run of `key` trained on, as its dataset input."""
        self._put(LogInput(key, bars.name, bars.digest, bars.source, bars.profile, context))

    def end_run(self, key: str, status: str) -> None:
        self._put(EndRun(key, status))

    def end_lost_runs(self, known: list[str]) -> None:
        """End, KILLED with stop_reason `lost`, the sweep's runs still RUNNING whose key is not in `known`."""
        self._put(EndLostRuns(tuple(sorted(known))))

    # -- what the store holds (asks it, on the caller's thread) --------------------------------
    def recorded_tags(self, key: str) -> dict[str, str] | None:
        """The tags of the run of `key`: the store's, else those a write waiting to be sent (an earlier driver's,
        from the spool) creates it with; None when neither has it (or the store does not answer and no write does)."""
        with self.done:  # the queue before the store: a start sent in between is in the store when it is asked
            waiting = [op.tags for op in self.queue if isinstance(op, StartRun) and op.key == key]
        try:
            found = self.runs.client.search_runs(
                [self.runs.experiment_id], f"tags.`{KEY_TAG}` = '{key}' and tags.`{SWEEP_TAG}` = '{self.sweep_id}'",
                max_results=1)
        except Exception:  # noqa: BLE001 - a store that does not answer knows nothing
            found = []
        if found:
            return dict(found[0].data.tags)
        return dict(waiting[0]) if waiting else None

    # -- waiting -----------------------------------------------------------------------------
    def flush(self, timeout_s: float) -> bool:
        """Wait until every write is sent; False when time ran out first."""
        deadline = time.monotonic() + timeout_s
        with self.done:
            while self.queue or self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.done.wait(min(left, 0.5))
        return True

    def close(self, timeout_s: float) -> int:
        """Flush for at most `timeout_s`, stop, save what is left to the spool; returns how many were saved."""
        if not self.flush(timeout_s) and self.down_since is not None:
            note(f"tracking: the store has not answered for {time.monotonic() - self.down_since:.0f} s")
        with self.done:
            self.stopping = True
            left = list(self.queue)
            self.done.notify_all()
            self.spool.keep_only(left)  # it holds these and the ones sent before them: keep only these
        if left:
            note(f"tracking: {len(left)} write(s) not sent are saved in {self.spool.path}; they are sent by the next "
                  "`mamba-tune resume` of this sweep")
        return len(left)

    # -- the sending thread -------------------------------------------------------------------
    def _put(self, op: Operation) -> None:
        with self.done:
            self.spool.append(op)  # before it is queued: a crash from here on loses nothing
            self.queue.append(op)
            self.done.notify_all()

    def _serve(self) -> None:
        delay = RETRY_MIN_S
        while True:
            with self.done:
                while not self.queue and not self.stopping:
                    self.done.wait()
                if self.stopping:
                    return
                op = self.queue[0]
                self.busy = True
            try:
                op.apply(self.runs)
            except Exception as exc:  # noqa: BLE001 - every failure is either retried or reported
                if not _transient(exc):
                    note(f"tracking: a write failed for good ({op.kind} for {op.key}): {first_line(exc)}; "
                          "it is skipped, the sweep goes on")
                else:
                    self._unreachable(exc, delay)
                    with self.done:
                        self.busy = False
                        self.done.wait(delay)  # close() wakes us
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
            delay = RETRY_MIN_S
            if self.down_since is not None:
                self.sent_while_down += 1
                if len(self.queue) == 1:  # the last one waiting: said before flush() can return
                    note(f"tracking: the store answers again after {time.monotonic() - self.down_since:.0f} s; "
                          f"sent {self.sent_while_down} buffered write(s)")
                    self.down_since, self.sent_while_down = None, 0
            with self.done:
                self.queue.popleft()
                self.busy = False
                if not self.queue:  # everything written is sent: the spool has nothing to keep
                    self.spool.clear()
                self.done.notify_all()

    def _unreachable(self, exc: Exception, delay: float) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            note(f"tracking: the store does not answer ({first_line(exc)}); training goes on, MLflow writes are "
                  f"buffered and retried (every {delay:.0f}-{RETRY_MAX_S:.0f} s) until it does")


def _transient(exc: Exception) -> bool:
    """A failure that retrying can cure: no connection, a timeout, the server busy or failing, a locked database."""
    if isinstance(exc, (ConnectionError, TimeoutError, requests.exceptions.RequestException,
                        sqlalchemy.exc.OperationalError)):
        return True
    if isinstance(exc, RestException):  # the server answered: a 5xx-style code may pass, a refusal will not
        return exc.error_code in _RETRYABLE_CODES
    if isinstance(exc, MlflowException):  # the client's wrapping of a failed request or of a database error
        text = str(exc)
        failed_request = "API request to" in text and ("failed with exception" in text or "timeout" in text or any(
            f"failed with error code {code}" in text for code in ("429", "500", "502", "503", "504")))
        return failed_request or "database is locked" in text
    return False


def note(text: str) -> None:
    """A line for the sweep's progress output (tuning/cli/sweep.py prints it)."""
    publish(Note(text))

