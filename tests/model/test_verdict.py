"""versus: the loss ratio and the Diebold-Mariano verdict, with its wide-bandwidth twin, of a forecast against a reference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from model.diebold_mariano import diebold_mariano
from model.verdict import overlap, versus


def test_versus_gives_the_ratio_and_no_p_value_where_the_test_cannot_be_made():
    errors, reference = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    judged = versus(errors, reference, horizon=5)  # 3 samples, a 5-bar horizon: no Diebold-Mariano test
    torch.testing.assert_close(judged["ratio"], 1.0)
    assert judged["test_loss"] == 2.0 and math.isnan(judged["dm_stat"]) and math.isnan(judged["dm_pvalue"])
    assert all(math.isnan(judged[k]) for k in ("dm_lags", "dm_fallback", "dm_stat_wide", "dm_pvalue_wide",
                                               "dm_lags_wide", "dm_fallback_wide"))
    assert versus(errors, reference, horizon=1)["dm_pvalue"] == pytest.approx(1.0)  # mean differential 0


def test_versus_keeps_the_wide_statistic_and_the_lags_beside_the_verdict():
    rng = np.random.default_rng(0)
    reference = rng.random(200)
    errors = reference - 0.05 + 0.3 * rng.standard_normal(200)
    judged = versus(errors, reference, horizon=3)
    verdict, wide = diebold_mariano(errors, reference, 3), diebold_mariano(errors, reference, 6)  # wide: 2h
    assert (judged["dm_stat"], judged["dm_pvalue"], judged["dm_lags"]) == (verdict.stat, verdict.pvalue, 2)
    assert (judged["dm_stat_wide"], judged["dm_pvalue_wide"], judged["dm_lags_wide"]) == (wide.stat, wide.pvalue, 5)
    json.dumps(judged, allow_nan=False)  # every figure a plain number for test.json and MLflow
    # where the verdict's rectangular variance is negative it says so: the h = 1 test, 0 lags, never p = 0
    alternating = np.tile([1.0, 0.0], 100)
    fell_back = versus(alternating + 0.01, np.full(200, 0.5), horizon=2)  # gamma_1 = -gamma_0: lrv -gamma_0
    assert (fell_back["dm_lags"], fell_back["dm_lags_wide"]) == (0, 0) and 0.5 < fell_back["dm_pvalue"] < 1


def test_versus_says_whether_each_test_fell_back_to_h_1_where_the_lags_alone_cannot():
    rng = np.random.default_rng(1)
    reference = rng.random(200)
    errors = reference - 0.05 + 0.3 * rng.standard_normal(200)
    at_one = versus(errors, reference, horizon=1)  # no lags to drop: 0 lags, and no fallback
    assert (at_one["dm_lags"], at_one["dm_fallback"], at_one["dm_fallback_wide"]) == (0, 0.0, 0.0)
    alternating = np.tile([1.0, 0.0], 100)
    fell_back = versus(alternating + 0.01, np.full(200, 0.5), horizon=2)  # 0 lags too, as the h = 1 fallback
    assert (fell_back["dm_lags"], fell_back["dm_fallback"], fell_back["dm_fallback_wide"]) == (0, 1.0, 1.0)
    verdict = diebold_mariano(alternating + 0.01, np.full(200, 0.5), 2)
    assert verdict.fallback and fell_back["dm_fallback"] == float(verdict.fallback)
    json.dumps(fell_back, allow_nan=False)


def test_overlap_is_the_horizon_of_a_volatility_target_and_1_for_a_close_target():
    assert overlap("close", 12) == 1  # one bar ahead: no overlap whatever the horizon
    assert overlap("realized_vol", 12) == 12 and overlap("realized_vol", 1) == 1
