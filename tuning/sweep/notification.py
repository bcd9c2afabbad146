"""The one message a sweep sends its webhook (`--notify URL`, MAMBA_TUNE_WEBHOOK, or `notify: {webhook: URL}` in
the space) when it ends, fails or is interrupted: built by a pure function, POSTed by `post` (the CLI calls it, and
says in one warning line when it fails; a notification never changes how the sweep ends).

`post` has one deadline, DEADLINE_S, for all of it: the name's resolution, the connection (and TLS), the request
and the answer. A webhook that hangs, answers a byte at a time, or a name that resolves slowly, never holds a
sweep's end longer: the POST goes on in a daemon thread, abandoned, and the sweep's end goes on.

The body is Slack-compatible JSON: `text`, a line for people, and the same facts as fields for programs:
  {"text": "...", "sweep": "smoke", "status": "ended" | "failed" | "interrupted", "trials": 5, "trials_asked": 5,
   "best_val_loss": 0.2311, "verdict": "test segment: winner ... vs HAR ...: better than HAR", "error": null,
   "mlflow": {"uri": "http://mlflow:5000", "run_id": "...", "link": "http://mlflow:5000/#/experiments/1/runs/..."},
   "objective": "mse_log"}   (what best_val_loss is in; left out where it is not known)
"""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tuning.tracking.objective import title

ENDED, FAILED, INTERRUPTED = "ended", "failed", "interrupted"
DEADLINE_S = 10.0  # one notification, all of it: name resolution, connection, request and answer
T = TypeVar("T")


@dataclass(frozen=True)
class SweepEnd:
    """How a sweep's run (by `sweep` or `resume`) ended, as its notification tells it."""

    sweep: str
    status: str  # ENDED, FAILED or INTERRUPTED
    trials: int  # search trials finished
    trials_asked: int
    best_val_loss: float | None  # the best search trial's best validation loss; None before one finished
    verdict: str | None  # the winner against HAR on the test segment, as the sweep printed it; None without a look
    mlflow_uri: str  # the tracking store
    mlflow_run: str | None = None  # the sweep's parent run; None where the store did not say
    mlflow_link: str | None = None  # its page in the MLflow UI, where the store is a server
    error: str | None = None  # why it failed, in one line
    resume_hint: str | None = None  # the command that continues it
    objective: str | None = None  # what best_val_loss is in (data.objective resolved); None: not known


def notification(end: SweepEnd) -> dict[str, Any]:
    """The JSON body of `end`'s notification: a line for people (`text`, as Slack shows it) and the facts."""
    best = end.best_val_loss if end.best_val_loss is not None and math.isfinite(end.best_val_loss) else None
    return {"text": _text(end, best), "sweep": end.sweep, "status": end.status, "trials": end.trials,
            "trials_asked": end.trials_asked, "best_val_loss": best, "verdict": end.verdict, "error": end.error,
            "mlflow": {"uri": end.mlflow_uri, "run_id": end.mlflow_run, "link": end.mlflow_link},
            **({"objective": end.objective} if end.objective else {})}


def _text(end: SweepEnd, best: float | None) -> str:
    counted = f"{end.trials}/{end.trials_asked} trials"
    best_text = f", best val {best:.4f}" if best is not None else ""
    if best_text and end.objective:
        best_text += f" ({title(end.objective)})"
    if end.status == ENDED:
        head = f"mamba-tune sweep {end.sweep} ended: {counted}{best_text}"
    elif end.status == INTERRUPTED:
        head = f"mamba-tune sweep {end.sweep} was interrupted: {counted}{best_text}"
    else:
        head = f"mamba-tune sweep {end.sweep} failed: {end.error or 'see its output'} ({counted}{best_text})"
    lines = [head]
    if end.verdict:
        lines.append(end.verdict)
    if end.resume_hint and end.status != ENDED:
        lines.append(f"continue with `{end.resume_hint}`")
    lines.append(f"MLflow: {end.mlflow_link or end.mlflow_uri}")
    return "\n".join(lines)


class NotifyError(Exception):
    """The webhook did not take the message: its words never hold the URL (a secret), only what went wrong."""


def within(seconds: float, work: Callable[[], T]) -> tuple[bool, T | None]:
    """(True, work()) where work() returns within `seconds`; else (False, None), work() left running in a daemon
    thread (it holds nothing the caller needs). work()'s exception is raised here."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="mamba-tune-bounded", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return False, None
    if "error" in outcome:
        raise outcome["error"]
    return True, outcome["value"]


def post(url: str, body: dict[str, Any], deadline_s: float = DEADLINE_S) -> None:
    """POST `body` as JSON to `url`, all of it within `deadline_s`; raises NotifyError when it cannot be sent in
    time or the webhook answers an error."""
    done, _ = within(deadline_s, lambda: _post(url, body, deadline_s))
    if not done:
        raise NotifyError(f"no answer within {deadline_s:g} s (name resolution, connection and answer together)")


def _post(url: str, body: dict[str, Any], timeout_s: float) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "mamba-tune"})
    try:  # each socket operation waits at most timeout_s, so that an abandoned POST ends on its own
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 - http(s) only (NotifyConfig)
            answer.read(1024)
    except urllib.error.HTTPError as exc:
        raise NotifyError(f"it answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise NotifyError(str(exc.reason)) from None
    except OSError as exc:  # a timeout, a reset connection
        raise NotifyError(str(exc) or type(exc).__name__) from None
    except ValueError:  # its words would repeat the URL
        raise NotifyError("urllib cannot open the URL") from None
