"""The ETA of the sweep's progress lines (tuning/cli/sweep_eta.py): the runs timed on the driver's clock."""

from __future__ import annotations

import torch

from tests.tuning.cli.test_progress import record
from tuning.cli.sweep_eta import SweepClock
from tuning.cli.sweep_progress import SweepProgress
from tuning.progress import EpochEnded, TrialEnded, TrialStarted, publish
from tuning.search.eta import SweepBudget
from tuning.search.space import SchedulerConfig

SMALL = SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2)  # a new trial: 2 + 2/2 = 3 epochs


class Ticks:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sweep_clock_says_nothing_until_an_epochs_time_is_known():
    ticks = Ticks()
    clock = SweepClock(SweepBudget(SMALL, concurrency=1, confirm_runs=0), trials=2, clock=ticks)
    clock.started_run("a", confirming=False)
    ticks.now = 4.0
    clock.epoch("a", 0)  # its first report: the run's start took 4 s
    assert clock.seconds_left() is None and clock.eta_text() == ""


def test_sweep_clock_times_epochs_and_starts_and_counts_the_runs_left():
    ticks = Ticks()
    clock = SweepClock(SweepBudget(SMALL, concurrency=1, confirm_runs=2), trials=3, searched=1, clock=ticks)
    clock.started_run("a", confirming=False)
    ticks.now = 4.0
    clock.epoch("a", 0)
    ticks.now = 14.0
    clock.epoch("a", 1)  # 10 s an epoch
    # a: 1 + 2/2 epochs (20 s); one trial to start (4 + 30 s); then 2 confirmation runs (4 + 40 s each)
    torch.testing.assert_close(clock.seconds_left(), 20 + 34 + 2 * 44.0)
    ticks.now = 34.0
    clock.epoch("a", 3)  # two epochs in 20 s: still 10 s each
    clock.ended("a", confirming=False)
    torch.testing.assert_close(clock.seconds_left(), 34 + 2 * 44.0)
    assert clock.eta_text() == " | ETA 2m02s"


def test_progress_ends_a_trials_line_with_the_eta_once_known(capsys):
    ticks = Ticks()
    progress = SweepProgress(trials=2, clock=SweepClock(SweepBudget(SMALL, 1, 0), trials=2, clock=ticks))
    handler = progress.attach()
    try:
        publish(TrialStarted("trial_a", {"learning_rate": 3e-3, "weight_decay": 1e-2, "batch_size": 64}))
        for epoch in range(5):
            ticks.now = 2.0 + 10 * epoch  # started in 2 s, then 10 s an epoch
            publish(EpochEnded("trial_a", epoch, 0.5))
        first = record("trial_a", "completed", 4, 0.25)
        publish(TrialEnded(first, running=0, finished=(first,), error=None))
    finally:
        progress.detach(handler)
    # trial_b to come: 2 s to start, 3 epochs of 10 s
    assert capsys.readouterr().out.splitlines()[-1] == (
        "trial trial_a ended completed at epoch 4, best val 0.2500@4 | running 0, finished 1/2 (1 completed, "
        "0 stopped) | best 0.2500 (trial_a) | ETA 32s")
