"""How long a sweep has left: its runs' epochs still to train, under its stopping rule, at the epoch time seen so far.

Pure: the CLI's progress line (tuning/cli/sweep.py) measures the times and counts the runs, and calls these.

A search trial at epoch e runs on to the next rung of ASHA (or max_epochs) for sure, and past each rung with
probability 1 / reduction_factor, ASHA's own promotion rate: the expected budget of a trial, in epochs. Under
Hyperband the same in each bracket, weighted by the chance Ray puts a trial there (schedulers/brackets.py): a later
bracket's first cut is later, so its trials train longer. It is an estimate, not a bound: the gate and a non-finite
loss stop trials sooner; ASHA, which compares a trial only with those that reached its rung before it, lets the
first trials of a sweep go further; a running trial's bracket is taken at those chances, not from its id. A
confirmation run has no scheduler and goes to max_epochs. Runs share `concurrency` slots; the search ends before
confirmation starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuning.search.finalists import ConfirmConfig
from tuning.search.schedulers.brackets import bracket_rungs, bracket_weights
from tuning.search.space import SchedulerConfig


def trial_epochs_left(epoch: int, scheduler: SchedulerConfig) -> float:
    """The epochs a search trial that has trained `epoch` epochs (0: none yet) is expected to train still: each
    bracket's (one but under Hyperband) weighted by the chance a trial is in it."""
    return sum(w * _epochs_left(epoch, milestones, scheduler) for w, milestones in _brackets(scheduler))


def _brackets(scheduler: SchedulerConfig) -> list[tuple[float, tuple[int, ...]]]:
    """Each bracket's chance and rungs below max_epochs: ASHA's (and Hyperband's) at grace_period *
    reduction_factor^k (a rung at max_epochs stops nothing: the trial ends there anyway). `none` runs every trial to
    max_epochs and the median rule has no fixed cut: one bracket, no rungs (an upper bound)."""
    if scheduler.kind in ("none", "median"):
        return [(1.0, ())]
    every = bracket_rungs(scheduler)
    weights = bracket_weights([len(b) for b in every]) if len(every) > 1 else [1.0]
    below = [tuple(m for m in milestones if m < scheduler.max_epochs) for milestones in every]
    return list(zip(weights, below, strict=True))


def _epochs_left(epoch: int, milestones: tuple[int, ...], scheduler: SchedulerConfig) -> float:
    """A trial's expected epochs still to train in a bracket with these rungs (below max_epochs)."""
    left, kept, at = 0.0, 1.0, epoch
    for milestone in (*milestones, scheduler.max_epochs):
        if milestone > at:
            left += kept * (milestone - at)
            at = milestone
        if epoch < milestone < scheduler.max_epochs:
            kept /= scheduler.reduction_factor  # a rung ahead: passed by the top 1/reduction_factor
    return left


def seconds_left(epoch_s: float, start_s: float, scheduler: SchedulerConfig, concurrency: int,
                 searching: Sequence[int], unstarted: int, confirming: Sequence[int] = (),
                 confirm_unstarted: int = 0) -> float:
    """The sweep's time left, in seconds.

    epoch_s: one epoch of one run, as measured (wall time, concurrent runs sharing the machine);
    start_s: a run's start before its first epoch (its Ray actors, its E0 evaluation);
    searching / confirming: the epoch each running search trial / confirmation run has reached;
    unstarted / confirm_unstarted: the search trials / confirmation runs not started yet."""
    search = [trial_epochs_left(e, scheduler) * epoch_s for e in searching]
    search += [start_s + trial_epochs_left(0, scheduler) * epoch_s] * unstarted
    confirm = [max(scheduler.max_epochs - e, 0) * epoch_s for e in confirming]
    confirm += [start_s + scheduler.max_epochs * epoch_s] * confirm_unstarted
    return _stage_s(search, concurrency) + _stage_s(confirm, concurrency)


def _stage_s(runs: list[float], concurrency: int) -> float:
    """A stage's runs on `concurrency` slots: their time shared among the slots, never less than the longest."""
    return max(sum(runs) / max(concurrency, 1), max(runs, default=0.0))


def duration_text(seconds: float) -> str:
    """45s, 3m20s, 2h05m: to the second under an hour, to the minute beyond."""
    whole = max(round(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"


@dataclass(frozen=True)
class SweepBudget:
    """What a sweep's time left is counted from, fixed for its run."""

    scheduler: SchedulerConfig
    concurrency: int  # runs at once
    confirm_runs: int  # confirmation runs in all, after the search (0: no confirm section)


def confirm_runs(confirm: ConfirmConfig | None) -> int:
    """The confirmation runs a sweep trains: each finalist's (1 + seeds) x folds runs, its search trial one of them."""
    return 0 if confirm is None else confirm.top_k * ((1 + len(confirm.seeds)) * confirm.folds - 1)
