"""Finalists confirmed (tuning/search/finalists.py): who they are, the runs they need, their scores, the winner."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from tuning.search.finalists import (
    ConfirmConfig,
    Unconfirmed,
    finalist_scores,
    finalists,
    pending_runs,
    seed_members,
    winner,
)
from tuning.search.ledger import TrialRecord


def record(trial_id, loss, reason="completed", stage="search", seed=0, fold=1, finalist=None, lr=1e-3):
    return TrialRecord(trial_id=trial_id, params={"learning_rate": lr}, stop_reason=reason, stop_epoch=4,
                       best_val_loss=loss, best_epoch=4, e0_val_loss=1.0, baseline_persistence=1.0, train_s=1.0,
                       stage=stage, seed=seed, fold=fold, finalist=finalist)


SEARCH = [record("a", 0.50, lr=1e-3), record("b", 0.40, lr=2e-3), record("c", 0.45, lr=3e-3),
          record("d", 0.10, reason="asha"), record("e", math.inf, reason="nan")]


def test_finalists_are_the_best_completed_search_trials():
    assert [r.trial_id for r in finalists(SEARCH, 2)] == ["b", "c"]
    assert [r.trial_id for r in finalists(SEARCH, 5)] == ["b", "c", "a"]  # fewer completed than top_k: all of them


def test_pending_runs_cover_every_seed_and_fold_but_the_search_trials_own():
    runs = pending_runs(SEARCH, ConfirmConfig(top_k=1, seeds=(7,), folds=2), base_seed=0)
    assert [(r.finalist, r.seed, r.fold) for r in runs] == [("b", 0, 2), ("b", 7, 1), ("b", 7, 2)]
    assert runs[0].config() == {"learning_rate": 2e-3, "seed": 0, "fold": 2, "finalist": "b"}
    assert ConfirmConfig(top_k=1, seeds=(7,), folds=2).runs_per_finalist == 3
    done = SEARCH + [record("x", 0.4, stage="confirm", seed=0, fold=2, finalist="b")]
    assert [(r.seed, r.fold) for r in pending_runs(done, ConfirmConfig(1, (7,), 2), 0)] == [(7, 1), (7, 2)]


def test_the_winner_has_the_lowest_mean_not_the_lowest_single_loss():
    confirm = ConfirmConfig(top_k=2, seeds=(1, 2))
    runs = [record("b1", 0.60, stage="confirm", seed=1, finalist="b"),
            record("b2", 0.62, stage="confirm", seed=2, finalist="b"),
            record("c1", 0.46, stage="confirm", seed=1, finalist="c"),
            record("c2", 0.44, stage="confirm", seed=2, finalist="c")]
    scores = finalist_scores(SEARCH + runs, confirm, 0)
    assert [(s.record.trial_id, s.n, s.planned) for s in scores] == [("c", 2, 2), ("b", 2, 2)]
    torch.testing.assert_close(scores[0].mean, 0.45)
    torch.testing.assert_close(scores[0].std, statistics.stdev([0.46, 0.44]))
    assert winner(SEARCH + runs, confirm, 0).trial_id == "c"  # b had the best single loss, 0.40
    assert winner(SEARCH + runs, None, 0).trial_id == "b"


def test_a_finalists_mean_averages_its_fresh_runs_only_its_search_loss_beside_it():
    # b's search loss, 0.40, is the minimum that made it a finalist: averaged in, it would win (0.453 < 0.457).
    runs = [record("b1", 0.48, stage="confirm", seed=1, finalist="b"),
            record("b2", 0.48, stage="confirm", seed=2, finalist="b"),
            record("c1", 0.46, stage="confirm", seed=1, finalist="c"),
            record("c2", 0.46, stage="confirm", seed=2, finalist="c")]
    confirm = ConfirmConfig(top_k=2, seeds=(1, 2))
    scores = finalist_scores(SEARCH + runs, confirm, 0)
    assert [(s.record.trial_id, s.losses, s.n, s.planned) for s in scores] == [("c", (0.46, 0.46), 2, 2),
                                                                               ("b", (0.48, 0.48), 2, 2)]
    torch.testing.assert_close([s.mean for s in scores], [0.46, 0.48])
    torch.testing.assert_close([s.search_loss for s in scores], [0.45, 0.40])
    assert winner(SEARCH + runs, confirm, 0).trial_id == "c"


def test_a_finalist_with_no_fresh_result_yet_has_no_mean_and_ranks_last():
    scores = finalist_scores(SEARCH + [record("c1", 0.46, stage="confirm", seed=1, finalist="c")],
                             ConfirmConfig(top_k=2, seeds=(1,)), 0)
    assert [(s.record.trial_id, s.n, s.complete) for s in scores] == [("c", 1, True), ("b", 0, False)]
    assert math.isnan(scores[1].mean) and math.isnan(scores[1].std)
    assert winner(SEARCH, ConfirmConfig(top_k=2, seeds=(1,)), 0, unconfirmed=True).trial_id == "b"  # none has one


CONFIRM = ConfirmConfig(top_k=2, seeds=(1, 2))
# c's runs are better than b's, but b lacks one: ranked on fewer runs, b's optimistic search loss would win.
PARTIAL = [record("b1", 0.41, stage="confirm", seed=1, finalist="b"),
           record("c1", 0.46, stage="confirm", seed=1, finalist="c"),
           record("c2", 0.44, stage="confirm", seed=2, finalist="c")]


def test_winner_refuses_a_confirmation_with_a_run_missing():
    for records in (SEARCH, SEARCH + PARTIAL):  # interrupted before confirmation, and during it
        with pytest.raises(Unconfirmed, match=r"confirmation runs? ha(s|ve) no result \(.*finalist b: \d of 2"):
            winner(records, CONFIRM, 0)
    with pytest.raises(Unconfirmed) as missing:
        winner(SEARCH + PARTIAL, CONFIRM, 0)
    assert missing.value.missing == 1 and [s.record.trial_id for s in missing.value.scores] == ["b"]
    assert str(missing.value) == "1 confirmation run has no result (finalist b: 1 of 2)"


def test_winner_unconfirmed_ranks_by_the_results_there_are():
    assert winner(SEARCH + PARTIAL, CONFIRM, 0, unconfirmed=True).trial_id == "b"  # its one fresh run, 0.41
    assert winner(SEARCH + PARTIAL + [record("b2", 0.62, stage="confirm", seed=2, finalist="b")],
                  CONFIRM, 0).trial_id == "c"  # complete: c's mean 0.45 beats b's 0.515


def test_a_failed_confirmation_run_is_no_result_and_is_pending_again():
    failed = record("b2", 0.30, reason="error", stage="confirm", seed=2, finalist="b")
    records = SEARCH + PARTIAL + [failed]
    assert [(r.finalist, r.seed, r.fold) for r in pending_runs(records, CONFIRM, 0)] == [("b", 2, 1)]
    (b,) = [s for s in finalist_scores(records, CONFIRM, 0) if s.record.trial_id == "b"]
    assert (b.n, b.planned, b.complete, b.missing) == (1, 2, False, 1)  # its 0.30 counts for nothing
    with pytest.raises(Unconfirmed):
        winner(records, CONFIRM, 0)
    rerun = record("b2-again", 0.62, stage="confirm", seed=2, finalist="b")
    assert not pending_runs(records + [rerun], CONFIRM, 0)
    assert winner(records + [rerun], CONFIRM, 0).trial_id == "c"


def test_a_diverged_confirmation_run_is_a_result_and_ranks_its_finalist_last():
    diverged = record("c2", 0.30, reason="nan", stage="confirm", seed=2, finalist="c")  # finite best before the NaN
    records = SEARCH + [record("b1", 0.9, stage="confirm", seed=1, finalist="b"),
                        record("b2", 0.9, stage="confirm", seed=2, finalist="b"),
                        record("c1", 0.46, stage="confirm", seed=1, finalist="c"), diverged]
    assert not pending_runs(records, CONFIRM, 0)
    scores = finalist_scores(records, CONFIRM, 0)
    assert [s.record.trial_id for s in scores] == ["b", "c"] and math.isinf(scores[1].mean)
    assert winner(records, CONFIRM, 0).trial_id == "b"


def test_a_finalist_whose_run_diverged_scores_inf():
    runs = [record("b1", math.inf, reason="nan", stage="confirm", seed=1, finalist="b")]
    (score,) = finalist_scores(SEARCH + runs, ConfirmConfig(top_k=1, seeds=(1,)), 0)
    assert math.isinf(score.mean) and math.isinf(score.std)


def test_winner_without_confirmation_runs_to_plan_is_the_search_best():
    assert winner(SEARCH, ConfirmConfig(top_k=2), 0).trial_id == "b"  # no seeds, one fold: nothing to confirm
    assert finalist_scores(SEARCH, ConfirmConfig(top_k=2), 0) == []  # no fresh run: no confirmed score


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"top_k": 0}, r"top_k must be a positive integer, got 0"),
        ({"folds": 1.5}, r"folds must be a positive integer, got 1.5"),
        ({"seeds": [1, True]}, r"seeds must be a list of integers, got \[1, True\]"),
        ({"seeds": [3, 4, 3]}, r"seeds must differ from each other, 3 is given twice; list each seed once"),
    ],
)
def test_confirm_config_rejects_each_bad_value(values, match):
    with pytest.raises(ValueError, match=match):
        ConfirmConfig(**values)


def test_a_ledger_from_before_confirmation_reads_as_search_trials():
    old = {k: v for k, v in record("a", 0.5).__dict__.items() if k not in ("stage", "seed", "fold", "finalist")}
    read = TrialRecord.from_dict(old)
    assert (read.stage, read.fold, read.finalist) == ("search", 1, None)


def test_seed_members_are_the_winner_and_its_completed_fold_1_runs_on_other_seeds_by_seed():
    chosen = record("a", 0.5)
    records = [chosen, record("b", 0.4),
               record("a-s2", 0.6, stage="confirm", seed=2, finalist="a"),
               record("a-s1", 0.55, stage="confirm", seed=1, finalist="a"),
               record("a-f2", 0.5, stage="confirm", seed=0, fold=2, finalist="a"),  # another fold: other samples
               record("a-s3", math.nan, reason="nan", stage="confirm", seed=3, finalist="a"),  # diverged
               record("b-s1", 0.3, stage="confirm", seed=1, finalist="b")]
    assert [m.trial_id for m in seed_members(records, chosen)] == ["a", "a-s1", "a-s2"]
    assert seed_members([chosen], chosen) == [chosen]
