"""A sweep's records as the API hands them over: the leaderboard as a DataFrame, the verdict against HAR."""

from __future__ import annotations

import math

import pytest

from mamba_tune.sweep_result import LEADERBOARD_COLUMNS, har_verdict, leaderboard_frame
from tuning.search.ledger import TrialRecord


def record(trial_id: str, loss: float, reason: str = "completed", stage: str = "search") -> TrialRecord:
    return TrialRecord(trial_id, {"learning_rate": 1e-3, "weight_decay": 0.1, "batch_size": 64}, reason, 6, loss, 4,
                       e0_val_loss=1.0, baseline_persistence=0.8, train_s=1.0, baseline_har=0.5, stage=stage)


def test_the_leaderboard_ranks_search_trials_as_the_cli_does():
    records = [record("slow", 0.45), record("cut", 0.30, reason="asha"), record("best", 0.40),
               record("confirm", 0.1, stage="confirm"), record("nan", math.inf, reason="nan")]
    frame = leaderboard_frame(records)
    assert list(frame.trial_id) == ["best", "slow", "cut", "nan"]  # completed first, then by loss; no confirm run
    assert list(frame.index) == [1, 2, 3, 4] and frame.index.name == "rank"
    assert list(frame.columns) == ["trial_id", "learning_rate", "weight_decay", "batch_size", *LEADERBOARD_COLUMNS]
    assert frame.loc[1, "vs_har"] == pytest.approx(0.8) and frame.loc[1, "vs_e0"] == pytest.approx(0.4)
    assert math.isnan(frame.loc[4, "vs_har"])


def test_an_empty_ledger_is_an_empty_leaderboard_with_its_columns():
    frame = leaderboard_frame([])
    assert frame.empty and list(frame.columns) == ["trial_id", *LEADERBOARD_COLUMNS]


@pytest.mark.parametrize(("loss", "pvalue", "outcome"), [(0.3, 0.01, "better"), (0.5, 0.01, "worse"),
                                                         (0.3, 0.2, "not distinguishable"),
                                                         (0.3, math.nan, "not distinguishable")])
def test_the_verdict_against_har_is_the_clis(loss, pvalue, outcome):
    look = {"test_loss": loss, "vs_har": {"test_loss": 0.4, "ratio": loss / 0.4, "dm_stat": -2.0, "dm_pvalue": pvalue}}
    verdict = har_verdict(look)
    assert verdict.outcome == outcome and verdict.reference == "HAR"
    assert verdict.text.startswith(f"test segment: winner {loss:.3f} vs HAR 0.400")
    assert verdict.ratio == pytest.approx(loss / 0.4)


def test_no_look_is_no_verdict():
    assert har_verdict(None) is None
