"""tuning/cli/figures.py: the verdict of the one look, whether the winner beat a reference beyond noise."""

from __future__ import annotations

import math

import pytest

from tuning.cli.figures import SIGNIFICANCE, verdict_line


@pytest.mark.parametrize("winner, reference, pvalue, expected", [
    (0.412, 0.431, 0.03, "test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=0.03): better than HAR"),
    (0.452, 0.431, 0.01, "test segment: winner 0.452 vs HAR 0.431 (+4.9%, DM p=0.01): worse than HAR"),
    (0.425, 0.431, 0.41,
     "test segment: winner 0.425 vs HAR 0.431 (-1.4%, DM p=0.41): not distinguishable from HAR (p=0.41)"),
    (0.452, 0.431, 0.2,
     "test segment: winner 0.452 vs HAR 0.431 (+4.9%, DM p=0.20): not distinguishable from HAR (p=0.20)"),
])
def test_verdict_line_wording_below_and_above_the_significance_level_for_both_signs(winner, reference, pvalue,
                                                                                    expected):
    assert verdict_line(winner, reference, pvalue) == expected


def test_verdict_line_names_the_reference():
    assert verdict_line(0.412, 0.431, 0.002, reference="untuned") == (
        "test segment: winner 0.412 vs untuned 0.431 (-4.4%, DM p=0.002): better than untuned")


@pytest.mark.parametrize("pvalue, shown", [(0.0, "p<0.001"), (1e-12, "p<0.001"), (0.00049, "p<0.001"),
                                           (0.004, "p=0.004"), (0.0496, "p=0.0496"), (0.049999999, "p<0.05")])
def test_verdict_line_tiny_and_threshold_p_values_are_written_on_their_side_of_the_level(pvalue, shown):
    line = verdict_line(0.412, 0.431, pvalue)
    assert f"DM {shown})" in line and line.endswith(": better than HAR")


def test_verdict_line_at_the_significance_level_is_not_distinguishable():
    assert SIGNIFICANCE == 0.05
    assert verdict_line(0.412, 0.431, 0.05).endswith(": not distinguishable from HAR (p=0.05)")


def test_verdict_line_without_a_p_value_or_a_reference_loss_says_n_a():
    assert verdict_line(0.412, 0.431, math.nan) == (
        "test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=n/a): not distinguishable from HAR (p=n/a)")
    assert "(n/a, DM p=0.41)" in verdict_line(0.412, 0.0, 0.41)


def test_verdict_line_equal_losses_are_not_distinguishable_and_change_by_plus_zero():
    assert verdict_line(0.431, 0.431, 1.0) == (
        "test segment: winner 0.431 vs HAR 0.431 (+0.0%, DM p=1.00): not distinguishable from HAR (p=1.00)")
