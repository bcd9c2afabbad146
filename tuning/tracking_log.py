"""A sweep's MLflow writes, made in order by one background thread; buffered while the store is down.

The sweep's driver enqueues writes (runs, epochs, tags, artifacts, ends) and goes on at once;
training never waits for MLflow. A write that fails because the store does not answer (no
connection, a timeout, a 5xx, a locked database) is retried, with backoff up to RETRY_MAX_S,
until it succeeds: the writes behind it wait, in order. A write MLflow refuses for good is
reported and skipped.

Every write is also appended to a spool file before it is queued (a write-ahead log), and the
file is emptied whenever the queue is: after a crash, or a sweep that ended while the store
was down (`close` waits a bounded time), the next TrackingLog of the same sweep (`mamba-tune
resume`) sends what it holds first, in the original order. Every write is idempotent (runs
are found by key before being created, a step already logged is skipped, tags and artifacts
overwrite), so replaying one that had been sent changes nothing.

Runs are named by keys: "sweep" for the parent run, the trial id for a trial's run.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import requests
import sqlalchemy.exc
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException, RestException

from model.atomic import write_text_atomic
from tuning.progress import Note, publish
from tuning.tracking_store import first_line

SWEEP_KEY = "sweep"
KEY_TAG, SWEEP_TAG = "mamba_tune.key", "mamba_tune.sweep_id"
RETRY_MIN_S, RETRY_MAX_S = 1.0, 10.0
_RETRYABLE_CODES = {"INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED",
                    "SERVICE_UNDER_MAINTENANCE", "IO_ERROR", "ABORTED"}  # the server's 5xx/429 kinds
STEP_MARKERS = ("val_loss", "trials_finished")  # a trial's and the sweep's per-step metric: which steps a run holds


class TrackingLog:
    def __init__(self, client: MlflowClient, experiment_id: str, sweep_id: str, spool: Path) -> None:
        self.client, self.experiment_id, self.sweep_id, self.spool = client, experiment_id, sweep_id, spool
        self.run_ids: dict[str, str] = {}
        self.logged_steps: dict[str, set[int]] = {}
        self.queue: deque[dict[str, Any]] = deque()
        self.busy = False  # an operation is being sent
        self.down_since: float | None = None  # the store stopped answering at (monotonic)
        self.sent_while_down = 0
        self.done = threading.Condition()
        self.stopping = False
        if spool.exists():  # writes an earlier run of this sweep may not have sent: first in line
            self.queue.extend(_read_spool(spool))
            if self.queue:
                note(f"tracking: sending {len(self.queue)} write(s) saved in {spool} by an earlier run")
        self.thread = threading.Thread(target=self._serve, name="mamba-tune-tracking", daemon=True)
        self.thread.start()

    # -- what the sweep asks for (returns at once) ------------------------------------------
    def start_run(self, key: str, name: str, parent: str | None = None, tags: dict[str, str] | None = None,
                  params: dict[str, Any] | None = None) -> None:
        """Find the run of `key` (reopened as RUNNING) or create it, nested under `parent`'s run."""
        self._put({"op": "start_run", "key": key, "name": name, "parent": parent, "tags": tags or {},
                   "params": {k: str(v) for k, v in (params or {}).items()}})

    def log_epoch(self, key: str, step: int, metrics: dict[str, float], timestamp_ms: int | None = None) -> None:
        """Metrics at step `step` (the epoch); a step the run already holds is not logged again."""
        self._put({"op": "metrics", "key": key, "step": int(step), "values": {k: float(v) for k, v in metrics.items()},
                   "timestamp": timestamp_ms or int(time.time() * 1000)})

    def set_tags(self, key: str, tags: dict[str, Any]) -> None:
        self._put({"op": "tags", "key": key, "tags": {k: str(v) for k, v in tags.items()}})

    def log_artifact(self, key: str, path: Path, folder: str | None = None, remove_after: bool = False) -> None:
        """Upload the file `path` into the run's artifacts (under `folder`); delete it once sent if asked."""
        self._put({"op": "artifact", "key": key, "path": str(path), "folder": folder, "remove": remove_after})

    def end_run(self, key: str, status: str) -> None:
        self._put({"op": "end_run", "key": key, "status": status})

    def end_lost_runs(self, known: list[str]) -> None:
        """End, KILLED with stop_reason `lost`, the sweep's runs still RUNNING whose key is not in `known`."""
        self._put({"op": "end_lost", "key": SWEEP_KEY, "known": sorted(known)})

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
            if left:  # the spool holds them already; keep only them
                write_text_atomic(self.spool, "".join(json.dumps(op) + "\n" for op in left))
            else:
                self.spool.unlink(missing_ok=True)
        if left:
            note(f"tracking: {len(left)} write(s) not sent are saved in {self.spool}; they are sent by the next "
                  "`mamba-tune resume` of this sweep")
        return len(left)

    # -- the sending thread -------------------------------------------------------------------
    def _put(self, op: dict[str, Any]) -> None:
        line = json.dumps(op) + "\n"
        with self.done:
            self.spool.parent.mkdir(parents=True, exist_ok=True)
            with open(self.spool, "a") as spool:  # before it is queued: a crash from here on loses nothing
                spool.write(line)
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
                self._send(op)
            except Exception as exc:  # noqa: BLE001 - every failure is either retried or reported
                if not _transient(exc):
                    note(f"tracking: a write failed for good ({op['op']} for {op['key']}): {first_line(exc)}; "
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
                    self.spool.unlink(missing_ok=True)
                self.done.notify_all()

    def _unreachable(self, exc: Exception, delay: float) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            note(f"tracking: the store does not answer ({first_line(exc)}); training goes on, MLflow writes are "
                  f"buffered and retried (every {delay:.0f}-{RETRY_MAX_S:.0f} s) until it does")

    def _send(self, op: dict[str, Any]) -> None:
        kind, key = op["op"], op["key"]
        if kind == "start_run":
            self._start(op)
            return
        if kind == "end_lost":
            self._end_lost(set(op["known"]))
            return
        run_id = self._run_id(key)
        if kind == "metrics":
            if op["step"] in self.logged_steps[key]:
                return
            metrics = [Metric(k, v, op["timestamp"], op["step"]) for k, v in op["values"].items()]
            self.client.log_batch(run_id, metrics=metrics, synchronous=True)
            self.logged_steps[key].add(op["step"])
        elif kind == "tags":
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in op["tags"].items()], synchronous=True)
        elif kind == "artifact":
            path = Path(op["path"])
            if path.exists():  # sent, then replayed from the spool: the file is already gone
                self.client.log_artifact(run_id, str(path), op["folder"])
                if op["remove"]:
                    path.unlink()
        elif kind == "end_run":
            self.client.set_terminated(run_id, op["status"])

    def _start(self, op: dict[str, Any]) -> None:
        key = op["key"]
        found = self._find(key)
        if found is not None:
            self.run_ids[key] = found
            self.client.update_run(found, status="RUNNING")
            have = self.client.get_run(found).data.params  # a retried start may have created it without them
            missing = [Param(k, v) for k, v in op["params"].items() if k not in have]
            if missing:
                self.client.log_batch(found, params=missing, synchronous=True)
            return
        tags = {**op["tags"], KEY_TAG: key, SWEEP_TAG: self.sweep_id}
        if op["parent"] is not None:
            tags["mlflow.parentRunId"] = self._run_id(op["parent"])
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=op["name"])
        if op["params"]:
            self.client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in op["params"].items()],
                                  synchronous=True)
        self.run_ids[key], self.logged_steps[key] = run.info.run_id, set()

    def _end_lost(self, known: set[str]) -> None:
        """Runs a driver killed outright opened for trials Ray Tune had not saved yet: they will never end."""
        runs = self.client.search_runs(
            [self.experiment_id], f"tags.`{SWEEP_TAG}` = '{self.sweep_id}' and attributes.status = 'RUNNING'",
            max_results=1000)
        for run in runs:
            if run.data.tags.get(KEY_TAG) not in known | {SWEEP_KEY}:
                self.client.set_tag(run.info.run_id, "stop_reason", "lost")
                self.client.set_terminated(run.info.run_id, "KILLED")

    def _run_id(self, key: str) -> str:
        if key not in self.run_ids:  # logged by an earlier run of the sweep (resume, spool replay)
            found = self._find(key)
            if found is None:
                raise MlflowException(f"no run for {key!r} in this sweep", error_code="RESOURCE_DOES_NOT_EXIST")
            self.run_ids[key] = found
        return self.run_ids[key]

    def _find(self, key: str) -> str | None:
        runs = self.client.search_runs(
            [self.experiment_id], f"tags.`{KEY_TAG}` = '{key}' and tags.`{SWEEP_TAG}` = '{self.sweep_id}'",
            max_results=1)
        if not runs:
            return None
        run_id = runs[0].info.run_id
        self.logged_steps[key] = {m.step for metric in STEP_MARKERS
                                  for m in self.client.get_metric_history(run_id, metric)}
        return run_id


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


def _read_spool(spool: Path) -> list[dict[str, Any]]:
    """The spool's writes; a last line cut short by a crash is left out."""
    ops = []
    for line in spool.read_text().splitlines():
        try:
            ops.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return ops


def note(text: str) -> None:
    """A line for the sweep's progress output (tuning/cli_sweep.py prints it)."""
    publish(Note(text))

