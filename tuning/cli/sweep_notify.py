"""`sweep --notify URL` / `resume --notify URL` (or MAMBA_TUNE_WEBHOOK, or at `sweep` the space's `notify:
{webhook: URL}`): the webhook is told, in one POST, how the sweep ended, failed or was interrupted
(tuning/sweep/notification.py builds and sends it).

A webhook that is down, hangs or answers an error costs one warning line, never the sweep's exit code, and holds
the sweep's end at most LOOKUP_S (the MLflow run's link) plus DEADLINE_S (the POST). The URL is a secret: only its
host is ever printed, and it is kept in no file (sweep.json says only that the sweep was started with one), so
`resume` takes it from --notify or MAMBA_TUNE_WEBHOOK again. SIGTERM (`kill`, `ray job stop`) stops a sweep as
Ctrl-C does, notifying or not (tuning/cli/sweep_signals.py), so that it ends as interrupted, resumable, and says so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tuning.cli.figures import verdict_line
from tuning.errors import UsageError
from tuning.search.finalists import SEARCH
from tuning.search.gate_verdict import NO_WINNER_EXIT
from tuning.search.ledger import Ledger, best_record
from tuning.search.notify_config import WEBHOOK_ENV, webhook_host, webhook_problem
from tuning.sweep.notification import ENDED, FAILED, INTERRUPTED, NotifyError, SweepEnd, notification, post, within
from tuning.sweep_files import LEDGER, SweepPaths, read_test_looks, sweep_looks

LOOKUP_S = 10.0  # the longest the sweep's MLflow run is looked for, for its link, before the notification goes


def add_notify_option(parser: Any) -> None:
    parser.add_argument("--notify", metavar="URL",
                        help=f"POST one JSON message (Slack-compatible) to this webhook when the sweep ends, fails or "
                        f"is interrupted (default: {WEBHOOK_ENV}, else at `sweep` the space's notify.webhook); the "
                        "URL is a secret, kept in no file: give it again to `resume` (see docs/notifications.md)")


def notify_url(flag: str | None, space: Any, environ: Mapping[str, str] = os.environ) -> str | None:
    """`sweep`'s webhook: --notify, else MAMBA_TUNE_WEBHOOK, else the space's notify.webhook; None for no
    notification. A bad one is a UsageError that never repeats the URL."""
    return _given_url(flag, environ) or (space.notify.webhook if space.notify is not None else None)


def resume_notify_url(flag: str | None, manifest: Any, environ: Mapping[str, str] = os.environ) -> str | None:
    """`resume`'s webhook: --notify, else MAMBA_TUNE_WEBHOOK, else the URL an older version kept in sweep.json
    (`manifest.legacy_webhook`: told this once; the caller drops it from the file, as a line here says). A sweep
    started with a webhook and resumed without one is told so in a warning line: it resumes, unnotified."""
    url = _given_url(flag, environ)
    if manifest.legacy_webhook is not None:
        kept = manifest.legacy_webhook if webhook_problem(manifest.legacy_webhook) is None else None
        url = url or (kept.strip() if kept else None)
        told = f"this resume notifies {webhook_host(url)}; " if url else ""
        print(f"note: sweep {manifest.name}'s sweep.json held its webhook URL, as earlier versions kept it, and a "
              f"secret has no place there: it is dropped from sweep.json and its storage copy; {told}later resumes "
              f"notify with --notify URL or {WEBHOOK_ENV}", file=sys.stderr, flush=True)
    elif url is None and manifest.webhook_set:
        print(f"warning: sweep {manifest.name} was started with a webhook, whose URL (a secret) is kept in no file; "
              f"this resume notifies none: give --notify URL or set {WEBHOOK_ENV} to have its end told",
              file=sys.stderr, flush=True)
    return url


def _given_url(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """--notify, else MAMBA_TUNE_WEBHOOK (set and not empty), checked; None where neither is given."""
    for source, url in (("--notify", flag), (WEBHOOK_ENV, environ.get(WEBHOOK_ENV) or None)):
        if url is not None:
            if problem := webhook_problem(url):
                raise UsageError(f"{source}: {problem}")
            return url.strip()
    return None


def notified(url: str | None, run: Callable[[], int], paths: SweepPaths, trials: int, store: Any,
             sweep_id: str, resume_hint: str, objective: str | None = None) -> int:
    """run() (the sweep), then its notification to `url` (none when None): ended for exit 0, interrupted for 130,
    failed for another exit code or an exception (raised on, once told). `objective`: the sweep's (what its best
    validation loss is in; its space's data.loss), None where not known."""
    if url is None:
        return run()

    def tell(status: str, error: str | None = None) -> None:
        try:
            end = sweep_end(status, paths, trials, store, sweep_id, resume_hint, error, objective)
        except Exception as exc:  # noqa: BLE001 - a notification never changes how the sweep ends
            print(f"warning: notification to {webhook_host(url)} failed: could not read how the sweep ended "
                  f"({_first_line(exc)})", file=sys.stderr, flush=True)
            return
        send(url, end)

    try:
        code = run()
    except KeyboardInterrupt:
        tell(INTERRUPTED)
        raise
    except Exception as exc:
        tell(FAILED, _first_line(exc))
        raise
    status = ENDED if code in (0, NO_WINNER_EXIT) else INTERRUPTED if code == 130 else FAILED
    tell(status, None if status != FAILED else f"exit code {code}; its error line says why")
    return code


def sweep_end(status: str, paths: SweepPaths, trials: int, store: Any, sweep_id: str, resume_hint: str,
              error: str | None = None, objective: str | None = None) -> SweepEnd:
    """What the notification tells, read from the sweep's folder (its ledger, its test look) and its store."""
    searched = [r for r in Ledger(paths.folder / LEDGER).records.values() if r.stage == SEARCH]
    best = best_record(searched)
    looks = sweep_looks(read_test_looks(paths.folder))  # a train --look's is never the sweep's verdict
    last = looks[-1] if looks else {}
    verdict = verdict_line(last["test_loss"], last["vs_har"]["test_loss"], last["vs_har"]["dm_pvalue"]) \
        if "vs_har" in last else None
    run, link = _mlflow_run(store, paths.name, sweep_id)
    return SweepEnd(paths.name, status, len(searched), trials, best.best_val_loss if best else None, verdict,
                    store.uri, run, link, error, resume_hint, objective)


def send(url: str, end: SweepEnd) -> None:
    """POST `end`'s notification; one warning line on stderr when it fails (only the webhook's host is shown)."""
    try:
        post(url, notification(end))
    except NotifyError as exc:
        print(f"warning: notification to {webhook_host(url)} failed: {exc}; the sweep's own result stands",
              file=sys.stderr, flush=True)


def _mlflow_run(store: Any, name: str, sweep_id: str) -> tuple[str | None, str | None]:
    """(the sweep's MLflow run id, its page where the store is a server); (None, None) where it is not found."""
    from tuning.tracking.runs import find_sweep_run

    answered, found = within(LOOKUP_S, lambda: find_sweep_run(store, name, sweep_id))  # a store that hangs: no link
    if not answered or found is None:
        return None, None
    experiment, run = found
    link = f"{store.uri.rstrip('/')}/#/experiments/{experiment}/runs/{run}" if not store.embedded else None
    return run, link


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
    return line if len(line) <= 200 else line[:200] + "..."
