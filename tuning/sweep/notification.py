"""The one message a sweep sends its webhook (`notify: {webhook: URL}` in the space, or `--notify URL`) when it
ends, fails or is interrupted: built by a pure function, POSTed by `post` (the CLI calls it, and says in one
warning line when it fails; a notification never changes how the sweep ends).

The body is Slack-compatible JSON: `text`, a line for people, and the same facts as fields for programs:
  {"text": "...", "sweep": "smoke", "status": "ended" | "failed" | "interrupted", "trials": 5, "trials_asked": 5,
   "best_val_loss": 0.2311, "verdict": "test segment: winner ... vs HAR ...: better than HAR", "error": null,
   "mlflow": {"uri": "http://mlflow:5000", "run_id": "...", "link": "http://mlflow:5000/#/experiments/1/runs/..."}}
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

ENDED, FAILED, INTERRUPTED = "ended", "failed", "interrupted"
TIMEOUT_S = 5.0


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


def notification(end: SweepEnd) -> dict[str, Any]:
    """The JSON body of `end`'s notification: a line for people (`text`, as Slack shows it) and the facts."""
    best = end.best_val_loss if end.best_val_loss is not None and math.isfinite(end.best_val_loss) else None
    return {"text": _text(end, best), "sweep": end.sweep, "status": end.status, "trials": end.trials,
            "trials_asked": end.trials_asked, "best_val_loss": best, "verdict": end.verdict, "error": end.error,
            "mlflow": {"uri": end.mlflow_uri, "run_id": end.mlflow_run, "link": end.mlflow_link}}


def _text(end: SweepEnd, best: float | None) -> str:
    counted = f"{end.trials}/{end.trials_asked} trials"
    best_text = f", best val {best:.4f}" if best is not None else ""
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


def post(url: str, body: dict[str, Any], timeout_s: float = TIMEOUT_S) -> None:
    """POST `body` as JSON to `url`; raises NotifyError when it cannot be sent or the webhook answers an error."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "mamba-tune"})
    try:
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
