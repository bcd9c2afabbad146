"""The sweep's progress events: what happened, as typed records, for whoever shows progress.

The sweep publishes them on the `mamba_tune.sweep` logger (nothing in the sweep prints); the CLI's
handler (tuning/cli/sweep.py) turns each into a line. A logger, not a callback: Ray Tune's callbacks
are pickled with the sweep, and the events must reach this driver's CLI, not an old one's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tuning.search.ledger import TrialRecord

LOGGER = "mamba_tune.sweep"
_events = logging.getLogger(LOGGER)


@dataclass(frozen=True)
class TrialStarted:
    trial_id: str
    params: dict[str, Any]  # the searched parameters: learning_rate, weight_decay, batch_size


@dataclass(frozen=True)
class EpochEnded:
    trial_id: str
    epoch: int
    val_loss: float


@dataclass(frozen=True)
class TrialEnded:
    record: TrialRecord  # as the ledger now holds it
    running: int  # trials still running
    finished: tuple[TrialRecord, ...]  # every trial in the ledger, this one included
    error: str | None  # the last line of an errored trial's error, or why an invalid one's combination was refused


@dataclass(frozen=True)
class Note:
    text: str  # a line of its own (a tracking write that failed, an orphaned run ended...)


SweepEvent = TrialStarted | EpochEnded | TrialEnded | Note


def publish(event: SweepEvent) -> None:
    """Hand `event` to whoever shows the sweep's progress (a warning for notes, info for the rest)."""
    level = logging.WARNING if isinstance(event, Note) else logging.INFO
    _events.log(level, "%s", event.text if isinstance(event, Note) else event, extra={"sweep_event": event})


def event_of(record: logging.LogRecord) -> SweepEvent | None:
    """The event a log record carries; None for any other record."""
    event = getattr(record, "sweep_event", None)
    return event if isinstance(event, TrialStarted | EpochEnded | TrialEnded | Note) else None
