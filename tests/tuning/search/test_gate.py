"""The milestone gate's decision, without Ray."""

from __future__ import annotations

import math

import pytest

from tuning.search.gate import GateConfig, gate_decision, stop_reason


@pytest.mark.parametrize(
    ("gate", "val_loss", "expected"),
    [
        (GateConfig(epoch=15, threshold=0.5), 0.49, None),
        (GateConfig(epoch=15, threshold=0.5), 0.51, "gate"),
        (GateConfig(epoch=15, ratio_to_baseline=1.0), 0.39, None),  # beats persistence (0.4)
        (GateConfig(epoch=15, ratio_to_baseline=1.0), 0.41, "gate"),
        (GateConfig(epoch=15, ratio_to_e0=0.9), 0.89, None),  # 11% better than E0 (1.0)
        (GateConfig(epoch=15, ratio_to_e0=0.9), 0.95, "gate"),
        (GateConfig(epoch=15, ratio_to_e0=0.9, ratio_to_baseline=1.0), 0.5, "gate"),  # all must hold
        (GateConfig(epoch=15), 5.0, None),  # no threshold: the gate never stops a finite loss
    ],
)
def test_gate_decision_at_the_milestone(gate, val_loss, expected):
    assert gate_decision(gate, epoch=15, val_loss=val_loss, e0_val_loss=1.0, baseline=0.4) == expected


def test_gate_decision_only_at_the_gate_epoch():
    gate = GateConfig(epoch=15, threshold=0.1)
    assert [gate_decision(gate, e, 0.5, 1.0, 0.4) for e in (14, 15, 16)] == [None, "gate", None]


@pytest.mark.parametrize("loss", [math.nan, math.inf])
def test_gate_decision_stops_a_non_finite_loss_at_any_epoch(loss):
    assert gate_decision(GateConfig(epoch=15), epoch=3, val_loss=loss, e0_val_loss=1.0, baseline=0.4) == "nan"


def test_gate_stops_a_trial_whose_best_is_still_e0():
    """The original system's red flag: no better than initialisation at the milestone."""
    assert gate_decision(GateConfig(epoch=15, ratio_to_e0=0.9), 15, val_loss=1.0, e0_val_loss=1.0, baseline=0.4) == "gate"


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"epoch": 0}, r"epoch must be a positive integer, got 0"),
        ({"threshold": -1.0}, r"threshold must be a positive number, got -1.0"),
        ({"ratio_to_e0": math.inf}, r"ratio_to_e0 must be a positive number, got inf"),
        ({"ratio_to_baseline": "1"}, r"ratio_to_baseline must be a positive number, got '1'"),
        ({"baseline": "garch"}, r"baseline must be one of har, persistence, mean, got 'garch'"),
    ],
)
def test_gate_config_rejects_invalid_values(values, match):
    with pytest.raises(ValueError, match=match):
        GateConfig(**values)


@pytest.mark.parametrize(("baseline", "expected"), [("har", "gate"), ("persistence", None), ("mean", None)])
def test_gate_ratio_to_baseline_reads_the_baseline_it_names(baseline, expected):
    """HAR is the default yardstick: 0.5 beats persistence (0.6) and the mean (1.2) but not HAR (0.45)."""
    gate = GateConfig(epoch=15, ratio_to_baseline=1.0, baseline=baseline)
    result = {"epoch": 15, "val_loss": 0.5, "e0_val_loss": 1.0,
              "baseline_har": 0.45, "baseline_persistence": 0.6, "baseline_mean": 1.2}
    assert GateConfig().baseline == "har"
    assert gate_decision(gate, 15, result["val_loss"], result["e0_val_loss"], gate.baseline_of(result)) == expected
    assert stop_reason(gate, 20, result, errored=False)[0] == (expected or "asha")


LAST = {"epoch": 2, "val_loss": 0.5, "e0_val_loss": 1.0, "baseline_persistence": 0.4, "baseline_har": 0.3}


@pytest.mark.parametrize(
    ("last", "errored", "expected"),
    [
        ({**LAST, "epoch": 6}, False, ("completed", 6)),
        ({**LAST, "epoch": 3}, False, ("asha", 3)),  # ended early, the gate passed: ASHA stopped it
        ({**LAST, "val_loss": 0.95}, False, ("gate", 2)),  # at the gate epoch, not 10% better than E0
        ({**LAST, "val_loss": math.nan, "epoch": 4}, False, ("nan", 4)),
        ({**LAST, "epoch": 1}, True, ("error", 1)),
        (None, False, ("error", 0)),  # reported nothing
    ],
)
def test_stop_reason_names_why_a_trial_ended(last, errored, expected):
    assert stop_reason(GateConfig(epoch=2, ratio_to_e0=0.9), 6, last, errored) == expected


def test_a_gate_at_the_last_epoch_that_fails_is_recorded_gate_not_completed():
    gate = GateConfig(epoch=6, ratio_to_e0=0.9)
    assert stop_reason(gate, 6, {**LAST, "epoch": 6, "val_loss": 0.95}, False) == ("gate", 6)
    assert stop_reason(gate, 6, {**LAST, "epoch": 6, "val_loss": 0.85}, False) == ("completed", 6)
