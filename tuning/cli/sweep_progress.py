"""What a running sweep prints: a line per trial (or confirmation run) started and ended, with the searched
settings, why and where it stopped, the best so far and the time left; on a terminal, a live status line of each
running trial's last epoch. It reads the sweep's progress events (tuning/progress.py) from their logger.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from tuning.cli.sweep_eta import SweepClock
from tuning.cli.sweep_report import short
from tuning.progress import LOGGER as PROGRESS_LOGGER
from tuning.progress import EpochEnded, Note, TrialEnded, TrialStarted, event_of
from tuning.search.finalists import CONFIRM, SEARCH
from tuning.search.ledger import best_record
from tuning.search.param_text import params_text


class SweepProgress(logging.Handler):
    """Prints the sweep's events: a line per trial started and ended; a live status line on a terminal."""

    def __init__(self, trials: int, clock: SweepClock | None = None) -> None:
        super().__init__(logging.INFO)
        self.trials = trials
        self.clock = clock  # the time left, said once an epoch's time is known (tuning/cli/sweep_eta.py)
        self.live = sys.stderr.isatty()
        self.status: dict[str, str] = {}
        self.saved = (logging.NOTSET, True)  # the logger's level and propagation before attach()

    def attach(self) -> logging.Handler:
        """Print the sweep's progress (and only here: not also through the root logger) until detach()."""
        logger = logging.getLogger(PROGRESS_LOGGER)
        self.saved = (logger.level, logger.propagate)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def detach(self, handler: logging.Handler) -> None:
        logger = logging.getLogger(PROGRESS_LOGGER)
        logger.removeHandler(handler)
        logger.level, logger.propagate = self.saved
        self._clear()

    def emit(self, record: logging.LogRecord) -> None:
        event = event_of(record)
        self._time(event)
        match event:
            case TrialStarted(trial_id, params) if "finalist" in params:
                self._line(f"confirm run {short(trial_id)} started: finalist {short(params['finalist'])}, "
                           f"seed {params['seed']}, fold {params['fold']}")
            case TrialStarted(trial_id, params):
                self._line(f"trial {short(trial_id)} started: {params_text(params)}")
            case EpochEnded(trial_id, epoch, val_loss):
                self.status[trial_id] = f"{short(trial_id)} e{epoch} val {val_loss:.4f}"
                if self.live:
                    sys.stderr.write("\r\033[K" + " | ".join(self.status.values()) + self._eta())
                    sys.stderr.flush()
            case TrialEnded() as ended:
                self._end(ended)
            case Note(text):
                self._line(text)

    def _end(self, event: TrialEnded) -> None:
        r = event.record
        self.status.pop(r.trial_id, None)
        why = f": {event.error}" if event.error else ""
        if r.stage == CONFIRM:
            confirmed = sum(f.stage == CONFIRM for f in event.finished)
            self._line(f"confirm run {short(r.trial_id)} (finalist {short(r.finalist or '')}, seed {r.seed}, fold "
                       f"{r.fold}) ended {r.stop_reason} at epoch {r.stop_epoch}{why}, best val {r.best_val_loss:.4f}"
                       f"@{r.best_epoch} | running {event.running}, {confirmed} confirmation run(s) finished"
                       f"{self._eta()}")
            return
        finished = [f for f in event.finished if f.stage == SEARCH]
        done = sum(f.stop_reason == "completed" for f in finished)
        best = best_record(list(finished))
        best_text = f"best {best.best_val_loss:.4f} ({short(best.trial_id)})" if best else "no completed trial yet"
        self._line(f"trial {short(r.trial_id)} ended {r.stop_reason} at epoch {r.stop_epoch}{why}, best val "
                   f"{r.best_val_loss:.4f}@{r.best_epoch} | running {event.running}, finished {len(finished)}/"
                   f"{self.trials} ({done} completed, {len(finished) - done} stopped) | {best_text}{self._eta()}")

    def _time(self, event: Any) -> None:
        """The sweep's clock sees every run's start, reports and end."""
        match event if self.clock is not None else None:
            case TrialStarted(trial_id, params):
                self.clock.started_run(trial_id, confirming="finalist" in params)
            case EpochEnded(trial_id, epoch):
                self.clock.epoch(trial_id, epoch)
            case TrialEnded(record=r):
                self.clock.ended(r.trial_id, confirming=r.stage == CONFIRM)

    def _eta(self) -> str:
        return self.clock.eta_text() if self.clock is not None else ""

    def _line(self, text: str) -> None:
        self._clear()
        print(text, flush=True)

    def _clear(self) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
