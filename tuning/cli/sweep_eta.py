"""The ETA of `mamba-tune sweep`'s progress line: the sweep's events timed on this driver's clock.

An epoch's time is the wall time between two reports of one run (training, validation, checkpoint and report
together, with the other runs sharing the machine); a run's start, from Tune starting it to its first report.
The estimate itself is tuning/search/eta.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tuning.search.eta import SweepBudget, duration_text, seconds_left


class SweepClock:
    """Times the sweep's runs as their events come, and says the time left (once an epoch's time is known)."""

    def __init__(self, budget: SweepBudget, trials: int, searched: int = 0, confirmed: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget, self.trials, self.clock = budget, trials, clock
        self.searched, self.confirmed = searched, confirmed  # runs ended (resume: the ledger's, at the start)
        self.running: dict[str, tuple[bool, int, float]] = {}  # run -> (a confirmation run, last epoch, its time)
        self.started: dict[str, float] = {}  # run -> when started, until its first report
        self.epoch_total, self.epochs = 0.0, 0
        self.start_total, self.starts = 0.0, 0

    def started_run(self, trial_id: str, confirming: bool) -> None:
        self.running[trial_id] = (confirming, 0, self.clock())
        self.started[trial_id] = self.running[trial_id][2]

    def epoch(self, trial_id: str, epoch: int) -> None:
        now = self.clock()
        confirming, last, at = self.running.get(trial_id, (False, epoch, now))
        if trial_id in self.started:  # its first report: the run's start
            self.start_total += now - self.started.pop(trial_id)
            self.starts += 1
        elif epoch > last:
            self.epoch_total += now - at
            self.epochs += epoch - last
        self.running[trial_id] = (confirming, epoch, now)

    def ended(self, trial_id: str, confirming: bool) -> None:
        self.running.pop(trial_id, None)
        self.started.pop(trial_id, None)
        if confirming:
            self.confirmed += 1
        else:
            self.searched += 1

    def seconds_left(self) -> float | None:
        """None until an epoch's time is known."""
        if not self.epochs:
            return None
        searching = [epoch for confirming, epoch, _ in self.running.values() if not confirming]
        confirming = [epoch for is_confirm, epoch, _ in self.running.values() if is_confirm]
        budget = self.budget
        return seconds_left(self.epoch_total / self.epochs, self.start_total / self.starts if self.starts else 0.0,
                            budget.scheduler, budget.concurrency, searching,
                            max(self.trials - self.searched - len(searching), 0), confirming,
                            max(budget.confirm_runs - self.confirmed - len(confirming), 0))

    def eta_text(self) -> str:
        """' | ETA 3m20s', or '' until an epoch's time is known."""
        left = self.seconds_left()
        return "" if left is None else f" | ETA {duration_text(left)}"
