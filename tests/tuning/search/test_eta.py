"""The sweep's time left (tuning/search/eta.py): ASHA's expected epochs per trial, runs over concurrency slots."""

from __future__ import annotations

import torch

from tuning.search.eta import confirm_runs, duration_text, seconds_left, trial_epochs_left
from tuning.search.finalists import ConfirmConfig
from tuning.search.schedulers.brackets import bracket_rungs
from tuning.search.space import SchedulerConfig

DEFAULT = SchedulerConfig(max_epochs=50, grace_period=5, reduction_factor=3)  # search_spaces/default.yaml's
SMALL = SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2)


def rungs(scheduler: SchedulerConfig) -> tuple[int, ...]:
    """The stopping rule's rungs below max_epochs that the estimate counts: ASHA's (Hyperband's first bracket's)."""
    return tuple(m for m in bracket_rungs(scheduler)[0] if m < scheduler.max_epochs)


def test_rungs_are_grace_times_reduction_powers_below_max_epochs():
    assert rungs(DEFAULT) == (5, 15, 45)
    assert rungs(SMALL) == (2,)  # a rung at max_epochs stops nothing
    assert rungs(SchedulerConfig(max_epochs=5, grace_period=5, reduction_factor=3)) == ()


def test_trial_epochs_left_keeps_one_in_reduction_factor_past_each_rung_ahead():
    # 5 for sure, then 10 at 1/3, 30 at 1/9, 5 at 1/27
    torch.testing.assert_close(trial_epochs_left(0, DEFAULT), 5 + 10 / 3 + 30 / 9 + 5 / 27)
    torch.testing.assert_close(trial_epochs_left(5, DEFAULT), 10 + 30 / 3 + 5 / 9)  # past rung 5: kept there
    torch.testing.assert_close(trial_epochs_left(3, SMALL), 1.0)
    assert trial_epochs_left(50, DEFAULT) == 0.0


def test_hyperbands_trial_epochs_are_each_brackets_weighted_by_rays_chance_of_it():
    hyperband = SchedulerConfig(kind="hyperband", max_epochs=50, grace_period=5, reduction_factor=3)  # 3 brackets
    assert rungs(hyperband) == (5, 15, 45)  # bracket 0's: ASHA's
    each = torch.tensor([5 + 10 / 3 + 30 / 9 + 5 / 27, 15 + 30 / 3 + 5 / 9, 45 + 5 / 3])  # rungs 5,15,45; 15,45; 45
    chance = torch.tensor([3.0, 2.0, 1.0]).sub(3).exp()  # Ray's: e^(rungs - most rungs)
    torch.testing.assert_close(torch.tensor(trial_epochs_left(0, hyperband)),
                               (each * chance).sum() / chance.sum())
    assert trial_epochs_left(0, hyperband) > trial_epochs_left(0, DEFAULT)  # later first cuts: more epochs
    one = SchedulerConfig(kind="hyperband", max_epochs=50, grace_period=5, reduction_factor=3, brackets=1)
    torch.testing.assert_close(trial_epochs_left(7, one), trial_epochs_left(7, DEFAULT))  # one bracket: ASHA


def test_seconds_left_shares_the_runs_among_the_slots():
    # SMALL: a new trial 2 + 2/2 = 3 epochs; one at epoch 1: 1 + 2/2 = 2; 10 s an epoch, 4 s to start
    torch.testing.assert_close(seconds_left(10.0, 4.0, SMALL, 2, searching=[1], unstarted=3),
                               (20 + 3 * 34) / 2)


def test_seconds_left_is_never_less_than_the_longest_run():
    torch.testing.assert_close(seconds_left(10.0, 0.0, SMALL, 4, searching=[0], unstarted=0), 30.0)


def test_seconds_left_adds_confirmation_runs_to_max_epochs_after_the_search():
    # search: one trial at epoch 3 (1 epoch); confirmation: one at epoch 1 (3 epochs), two to start (4 each + 5 s)
    torch.testing.assert_close(seconds_left(10.0, 5.0, SMALL, 2, searching=[3], unstarted=0, confirming=[1],
                                            confirm_unstarted=2), 10 + (30 + 2 * 45) / 2)


def test_seconds_left_is_zero_with_nothing_left():
    assert seconds_left(10.0, 5.0, SMALL, 2, searching=[], unstarted=0) == 0.0


def test_confirm_runs_counts_each_finalists_runs_but_its_search_trial():
    assert confirm_runs(None) == 0
    assert confirm_runs(ConfirmConfig(top_k=1, seeds=(1,), folds=2)) == 3
    assert confirm_runs(ConfirmConfig(top_k=3, seeds=(1, 2), folds=1)) == 6


def test_duration_text_to_the_second_under_an_hour_to_the_minute_beyond():
    assert [duration_text(s) for s in (0, 44.6, 200, 3599, 7500, 3599.6)] == \
        ["0s", "45s", "3m20s", "59m59s", "2h05m", "1h00m"]
