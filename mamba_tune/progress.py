"""A sweep's progress for an API caller: the typed events tuning/progress.py publishes on its logger
(TrialStarted, EpochEnded, TrialEnded, Note), handed to a callback, or shown as a progress bar over the search
trials (tqdm.auto: a widget in Jupyter, a text bar elsewhere)."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tuning.progress import LOGGER, EpochEnded, Note, SweepEvent, TrialEnded, TrialStarted, event_of
from tuning.search.finalists import SEARCH
from tuning.search.ledger import best_record

EVENTS = (TrialStarted, EpochEnded, TrialEnded, Note)
BAR = "bar"

Progress = Callable[[SweepEvent], None] | str | None


def in_notebook() -> bool:
    """Whether this is a Jupyter kernel (where `progress` defaults to the bar)."""
    shell = sys.modules.get("IPython")
    ipython = getattr(shell, "get_ipython", lambda: None)() if shell else None
    return type(ipython).__name__ == "ZMQInteractiveShell"


def callback_for(progress: Progress, total: Callable[[], tuple[int, int]]) -> Callable[[SweepEvent], None] | None:
    """The callable that receives each event: `progress` itself, a TrialBar for "bar" (None: "bar" in a notebook,
    nothing elsewhere: the CLI's lines show), or None for False. TypeError for anything else (a misuse of the API,
    as mamba_tune/argv.py's)."""
    if progress is None:
        progress = BAR if in_notebook() else False
    if progress is False:
        return None
    if progress == BAR:
        return TrialBar(total)
    if callable(progress):
        return progress
    raise TypeError(f"progress={progress!r}: give a callable taking each event, 'bar', or None")


class TrialBar:
    """A tqdm.auto bar over the sweep's search trials: one step per trial that ends, the best val_loss so far and the
    confirmation runs finished beside it. `total` is asked at the first trial's event (the sweep's manifest holds it
    then; a Note may come before): (search trials asked for, search trials already ended: a resumed sweep's)."""

    def __init__(self, total: Callable[[], tuple[int, int]]) -> None:
        self.total = total
        self.bar: Any = None

    def __call__(self, event: SweepEvent) -> None:
        if isinstance(event, Note):
            return  # the CLI's stderr shows notes; a note may come before the manifest is written
        if self.bar is None:
            from tqdm.auto import tqdm

            total, ended = self.total()
            self.bar = tqdm(total=total, initial=ended, unit="trial", desc="sweep", dynamic_ncols=True)
        if isinstance(event, TrialEnded):
            searched = [r for r in event.finished if r.stage == SEARCH]
            self.bar.n = len(searched)
            best = best_record(searched)
            confirmed = len(event.finished) - len(searched)
            self.bar.set_postfix_str((f"best {best.best_val_loss:.4f}" if best else "none completed yet")
                                     + (f", {confirmed} confirmation run(s)" if confirmed else ""), refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Forward(logging.Handler):
    """Hands each sweep event to `receive`. What `receive` raises never reaches the sweep's driver: the sweep goes on,
    the caller is warned once (a RuntimeWarning) and `receive` is handed no more of this sweep's events."""

    def __init__(self, receive: Callable[[SweepEvent], None]) -> None:
        super().__init__(logging.INFO)
        self.receive: Callable[[SweepEvent], None] | None = receive

    def emit(self, record: logging.LogRecord) -> None:
        event = event_of(record)
        if event is None or self.receive is None:
            return
        try:
            self.receive(event)
        except Exception as exc:  # noqa: BLE001 - a callback's bug must not stop the sweep
            stopped, self.receive = self.receive, None
            _warn(f"{_named(stopped)} raised {type(exc).__name__}: {exc}; the sweep goes on, handing it no more events")


def _named(receive: Callable[[SweepEvent], None]) -> str:
    if isinstance(receive, TrialBar):
        return "progress='bar'"
    return f"progress={getattr(receive, '__qualname__', None) or repr(receive)}"


def _warn(message: str) -> None:
    """`message` as a RuntimeWarning; where warnings are made errors, that error is not raised into the sweep."""
    with contextlib.suppress(Exception):  # a warnings filter of "error": the sweep goes on all the same
        warnings.warn(message, RuntimeWarning, stacklevel=2)


@contextmanager
def events_to(receive: Callable[[SweepEvent], None] | None) -> Iterator[None]:
    """Each sweep event published inside handed to `receive` (nothing when None); a bar is closed after."""
    if receive is None:
        yield
        return
    logger = logging.getLogger(LOGGER)
    handler, saved = _Forward(receive), logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)
        if isinstance(receive, TrialBar):
            receive.close()
