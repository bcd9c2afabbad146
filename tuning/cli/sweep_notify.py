"""`sweep --notify URL` / `resume --notify URL` (or the space's `notify: {webhook: URL}`): the webhook is told,
in one POST, how the sweep ended, failed or was interrupted (tuning/sweep/notification.py builds and sends it).

A webhook that is down or answers an error costs one warning line, never the sweep's exit code; the URL is a
secret and only its host is ever printed. While a notifying sweep runs, SIGTERM (`kill`, `ray job stop`) stops
it as Ctrl-C does, so that it ends as interrupted, resumable, and says so.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tuning.cli.figures import verdict_line
from tuning.errors import UsageError
from tuning.search.finalists import SEARCH
from tuning.search.ledger import Ledger, best_record
from tuning.search.notify_config import webhook_host, webhook_problem
from tuning.sweep.notification import ENDED, FAILED, INTERRUPTED, NotifyError, SweepEnd, notification, post
from tuning.sweep_files import LEDGER, SweepPaths, read_test_looks


def add_notify_option(parser: Any) -> None:
    parser.add_argument("--notify", metavar="URL",
                        help="POST one JSON message (Slack-compatible) to this webhook when the sweep ends, fails or "
                        "is interrupted (default: the space's notify.webhook; see docs/notifications.md)")


def notify_url(flag: str | None, space: Any) -> str | None:
    """--notify over the space's notify.webhook; None for no notification. A bad --notify is a UsageError that
    never repeats the URL."""
    if flag is None:
        return space.notify.webhook if space.notify is not None else None
    if problem := webhook_problem(flag):
        raise UsageError(f"--notify: {problem}")
    return flag.strip()


def notified(url: str | None, run: Callable[[], int], paths: SweepPaths, trials: int, store: Any,
             sweep_id: str, resume_hint: str) -> int:
    """run() (the sweep), then its notification to `url` (none when None): ended for exit 0, interrupted for 130,
    failed for another exit code or an exception (raised on, once told)."""
    if url is None:
        return run()

    def tell(status: str, error: str | None = None) -> None:
        try:
            end = sweep_end(status, paths, trials, store, sweep_id, resume_hint, error)
        except Exception as exc:  # noqa: BLE001 - a notification never changes how the sweep ends
            print(f"warning: notification to {webhook_host(url)} failed: could not read how the sweep ended "
                  f"({_first_line(exc)})", file=sys.stderr, flush=True)
            return
        send(url, end)

    try:
        with _sigterm_as_ctrl_c():
            code = run()
    except KeyboardInterrupt:
        tell(INTERRUPTED)
        raise
    except Exception as exc:
        tell(FAILED, _first_line(exc))
        raise
    status = ENDED if code == 0 else INTERRUPTED if code == 130 else FAILED
    tell(status, None if status != FAILED else f"exit code {code}; its error line says why")
    return code


def sweep_end(status: str, paths: SweepPaths, trials: int, store: Any, sweep_id: str, resume_hint: str,
              error: str | None = None) -> SweepEnd:
    """What the notification tells, read from the sweep's folder (its ledger, its test look) and its store."""
    searched = [r for r in Ledger(paths.folder / LEDGER).records.values() if r.stage == SEARCH]
    best = best_record(searched)
    looks = read_test_looks(paths.folder)
    last = looks[-1] if looks else {}
    verdict = verdict_line(last["test_loss"], last["vs_har"]["test_loss"], last["vs_har"]["dm_pvalue"]) \
        if "vs_har" in last else None
    run, link = _mlflow_run(store, paths.name, sweep_id)
    return SweepEnd(paths.name, status, len(searched), trials, best.best_val_loss if best else None, verdict,
                    store.uri, run, link, error, resume_hint)


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

    found = find_sweep_run(store, name, sweep_id)
    if found is None:
        return None, None
    experiment, run = found
    link = f"{store.uri.rstrip('/')}/#/experiments/{experiment}/runs/{run}" if not store.embedded else None
    return run, link


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM handled as SIGINT while the sweep runs: Ray Tune stops it gracefully, or KeyboardInterrupt."""
    try:
        saved = signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
    return line if len(line) <= 200 else line[:200] + "..."
