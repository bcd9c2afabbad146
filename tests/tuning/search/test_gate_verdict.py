"""A sweep no trial of which passed the gate ends with the answer (tuning/search/gate_verdict.py), on recorded
outcomes: how the best trial did against HAR at the gate's epoch, and the gate settings that would have passed it."""

from __future__ import annotations

import dataclasses

import pytest

from tests.tuning.sweeps import space_values
from tuning.cli.sweep_end import no_winner
from tuning.search.gate import GateConfig
from tuning.search.gate_verdict import NO_WINNER_EXIT, gate_verdict
from tuning.search.ledger import TrialRecord
from tuning.search.space import parse_space

HAR = 0.50
GATE = GateConfig(epoch=2, ratio_to_baseline=1.0)  # must beat HAR by epoch 2


def record(trial_id, curve, reason, stage="search"):
    """A search trial whose val_loss at epochs 0, 1, ... is `curve`, stopped for `reason` at its last epoch."""
    return TrialRecord(trial_id, {"learning_rate": 1e-3}, reason, len(curve) - 1, min(curve), curve.index(min(curve)),
                       curve[0], 0.6, 1.0, val_curve=tuple(curve), baseline_har=HAR, stage=stage)


GATED = [record("a", [1.0, 0.7, 0.56], "gate"), record("b", [1.0, 0.8, 0.53], "gate"),
         record("c", [1.0, 0.9], "asha"), record("d", [1.0], "error")]


def test_the_answer_names_hars_loss_the_best_trials_and_the_trial():
    verdict = gate_verdict(GATED, GATE, max_epochs=6)
    assert (verdict.epoch, verdict.trial_id, verdict.har) == (2, "b", HAR)
    assert verdict.best_loss == pytest.approx(0.53)
    answer, advice = verdict.lines()
    assert answer == ("no configuration beat HAR at the gate's epoch 2: HAR's validation loss 0.5000, the best "
                      "trial's 0.5300 (trial b); trials: 2 stopped by the gate, 1 stopped by the stopping rule, 1 failed")
    assert advice.startswith("what may change it: more bars (a longer history), another horizon (--set "
                             "data.horizon=N), a space that learns sooner, or a relaxed gate")


def test_the_relaxed_gate_given_is_the_least_round_setting_that_passes_the_best_trial():
    verdict = gate_verdict(GATED, GATE, max_epochs=6)
    assert verdict.relaxed == ("gate.ratio_to_baseline=1.06", "gate.epoch=4")  # 0.53 / 0.50 = 1.06
    assert 0.53 <= 1.06 * HAR
    e0 = gate_verdict(GATED, GateConfig(epoch=2, ratio_to_e0=0.5, threshold=0.4), max_epochs=2)
    assert e0.relaxed == ("gate.ratio_to_e0=0.53", "gate.threshold=0.53")  # no later epoch: max_epochs is 2


def test_a_trial_that_beat_har_but_not_the_gates_other_limit_is_said_as_such():
    verdict = gate_verdict([record("a", [1.0, 0.6, 0.45], "gate")], GateConfig(epoch=2, ratio_to_e0=0.4), 6)
    assert verdict.beat_har
    assert verdict.lines()[0] == ("no configuration passed the gate at epoch 2: the best trial's validation loss "
                                  "0.4500 (trial a) beat HAR's 0.5000 there, but not the gate's limit 0.4000 "
                                  "(trials: 1 stopped by the gate)")


@pytest.mark.parametrize("records", [
    [*GATED, record("e", [1.0, 0.5, 0.4, 0.3], "completed")],  # a winner: not this answer
    [record("d", [1.0], "error"), record("n", [1.0, 0.9], "nan")],  # failures: an error, not an answer
    [],
])
def test_no_verdict_where_a_trial_completed_or_none_reached_the_gate(records):
    assert gate_verdict(records, GATE, max_epochs=3) is None


def test_the_sweep_ends_with_the_answer_and_its_own_exit_code(capsys, tmp_path):
    space = parse_space(space_values(gate={"epoch": 2, "ratio_to_baseline": 1.0, "ratio_to_e0": None}), "t.yaml")
    assert NO_WINNER_EXIT not in (0, 1, 2, 130)
    verdict = gate_verdict(GATED, space.gate, space.scheduler.max_epochs)
    assert no_winner(GATED, verdict, space, tmp_path) == NO_WINNER_EXIT
    out, err = capsys.readouterr()
    assert err == ""
    assert "no configuration beat HAR at the gate's epoch 2: HAR's validation loss 0.5000, the best trial's 0.5300 " \
           "(trial b)" in out
    assert f"records: {tmp_path}/trials.json" in out


def test_a_sweep_whose_trials_all_failed_is_still_an_error(capsys, tmp_path):
    space = parse_space(space_values(), "t.yaml")
    failed = [record("d", [1.0], "error")]
    assert no_winner(failed, gate_verdict(failed, space.gate, space.scheduler.max_epochs), space, tmp_path) == 1
    assert capsys.readouterr().err.startswith("error: no trial ran all 4 epochs (1 error)")


@pytest.mark.parametrize("passed", [
    record("p", [1.0, 0.6, 0.45, 0.44], "asha"),  # through the gate at 2 (0.45 < HAR), stopped by the rule at 3
    record("q", [1.0, 0.6, 0.45], "asha"),  # through the gate at 2, stopped by the rule at that same epoch
    record("r", [1.0, 0.6, 0.45], "error"),  # through the gate at 2, then failed
])
def test_no_answer_where_a_trial_got_through_the_gate_and_was_stopped_later(passed, capsys, tmp_path):
    assert gate_verdict([*GATED, passed], GATE, max_epochs=6) is None  # "nothing beat HAR at the gate" is untrue
    space = parse_space(space_values(gate={"epoch": 2, "ratio_to_baseline": 1.0, "ratio_to_e0": None}), "t.yaml")
    assert no_winner([*GATED, passed], gate_verdict([*GATED, passed], space.gate, space.scheduler.max_epochs), space,
                     tmp_path) == 1
    assert capsys.readouterr().err.startswith("error: no trial ran all 4 epochs")


def test_the_best_is_the_best_the_gate_stopped_a_trial_that_failed_at_the_gate_failing_it_does_not_count():
    failed = record("f", [1.0, 0.6, 0.51], "error")  # reported epoch 2 above HAR's 0.50, then failed: gated anyway
    diverged = record("n", [1.0, 0.6], "nan")  # stopped at epoch 2 by a non-finite loss (not in its curve)
    diverged = dataclasses.replace(diverged, stop_epoch=2)
    verdict = gate_verdict([*GATED, failed, diverged], GATE, max_epochs=6)
    assert (verdict.trial_id, verdict.best_loss) == ("b", pytest.approx(0.53))  # not f's 0.51: the gate never said
