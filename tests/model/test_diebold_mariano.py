"""diebold_mariano: the statistic against hand computations, HLN's correction, the p-value, edge cases, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from torch.testing import assert_close

from model import diebold_mariano as dm_module
from model.diebold_mariano import DieboldMariano, diebold_mariano


def test_diebold_mariano_identical_losses_are_stat_zero_and_p_one():
    losses = np.random.default_rng(0).random(50)
    assert diebold_mariano(losses, losses.copy(), horizon=3) == DieboldMariano(0.0, 1.0, 50, 0.0)


@pytest.mark.parametrize("shift, sign", [(-0.5, -1), (0.5, 1)])
def test_diebold_mariano_constant_differential_is_infinite_with_p_zero(shift, sign):
    loss_b = np.arange(40) * 0.25  # exact in binary: d_t = shift for every t, no rounding
    result = diebold_mariano(loss_b + shift, loss_b, horizon=2)
    assert result.stat == sign * math.inf and result.pvalue == 0.0
    assert_close(result.mean_differential, shift)
    assert result.n == 40


def test_diebold_mariano_matches_a_hand_computation_where_newey_west_is_not_the_naive_variance():
    # h = 2, n = 6, d = a - b = [3, 1, 2, 2, 0, 4]; mean 2; centred [1, -1, 0, 0, -2, 2]
    # gamma_0 = (1 + 1 + 0 + 0 + 4 + 4) / 6 = 10/6            (the naive variance)
    # gamma_1 = (-1*1 + 0*-1 + 0*0 + -2*0 + 2*-2) / 6 = -5/6
    # lrv = gamma_0 + 2 * (1 - 1/2) * gamma_1 = 5/6           (Bartlett, L = h - 1 = 1)
    # DM = 2 / sqrt((5/6) / 6) = 12 / sqrt(5); HLN: sqrt((6 - 2)(6 - 2 + 1) / 36) = sqrt(20) / 6; DM* = 4
    loss_b = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    loss_a = loss_b + np.array([3.0, 1.0, 2.0, 2.0, 0.0, 4.0])
    result = diebold_mariano(loss_a, loss_b, horizon=2)
    assert_close(result.stat, 4.0)
    assert_close(result.mean_differential, 2.0)
    naive = 2 / math.sqrt((10 / 6) / 6) * math.sqrt(20) / 6  # what lag 0 alone would give
    assert abs(result.stat - naive) > 0.5
    assert_close(result.pvalue, float(2 * stats.t.sf(4.0, 5)))


def test_diebold_mariano_of_an_ma_differential_uses_its_autocovariances_up_to_lag_h_minus_1():
    h, n = 3, 400
    noise = np.random.default_rng(1).standard_normal(n + 2)
    d = 0.1 + noise[2:] + noise[1:-1] + noise[:-2]  # MA(2): overlapping 3-step sums, like h-step targets
    loss_b = np.random.default_rng(2).random(n)
    result = diebold_mariano(loss_b + d, loss_b, horizon=h)

    values = (loss_b + d - loss_b).tolist()  # the differential exactly as the function sees it
    mean = sum(values) / n
    gamma = [sum((values[t] - mean) * (values[t - k] - mean) for t in range(k, n)) / n for k in range(h)]
    lrv = gamma[0] + 2 * ((1 - 1 / 3) * gamma[1] + (1 - 2 / 3) * gamma[2])
    assert lrv > 1.5 * gamma[0]  # the overlap matters: the naive variance would be far too small
    expected = mean / math.sqrt(lrv / n) * math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    assert_close(result.stat, expected)
    assert_close(result.mean_differential, mean)


def test_diebold_mariano_hln_factor_scales_the_plain_statistic():
    n, h = 30, 4
    rng = np.random.default_rng(3)
    loss_a, loss_b = rng.random(n) + 0.1, rng.random(n)
    d = loss_a - loss_b
    plain = d.mean() / math.sqrt(dm_module.newey_west_variance(d, h - 1) / n)
    result = diebold_mariano(loss_a, loss_b, horizon=h)
    assert_close(result.stat / plain, math.sqrt((n - h) * (n - h + 1)) / n)
    assert_close(dm_module.hln_factor(n, h), (n + 1 - 2 * h + h * (h - 1) / n) / n)


def test_diebold_mariano_at_horizon_one_is_the_paired_t_test():
    rng = np.random.default_rng(4)
    loss_a, loss_b = rng.random(25), rng.random(25) + 0.2
    result = diebold_mariano(loss_a, loss_b, horizon=1)
    paired = stats.ttest_rel(loss_a, loss_b)
    assert_close(result.stat, float(paired.statistic))
    assert_close(result.pvalue, float(paired.pvalue))
    assert result.stat < 0  # loss_a lower: a is better


@pytest.mark.parametrize("stat, n", [(0.0, 10), (1.3, 10), (-2.5, 40), (7.0, 200)])
def test_two_sided_pvalue_matches_student_t_with_n_minus_1_degrees_of_freedom(stat, n):
    assert_close(dm_module.two_sided_pvalue(stat, n), float(2 * (1 - stats.t.cdf(abs(stat), n - 1))))


def test_diebold_mariano_non_positive_variance_estimate_counts_as_no_noise(monkeypatch):
    monkeypatch.setattr(dm_module, "newey_west_variance", lambda d, lags: -1e-3)
    rng = np.random.default_rng(5)
    result = diebold_mariano(rng.random(20), rng.random(20) + 1, horizon=2)
    assert result.stat == -math.inf and result.pvalue == 0.0


@pytest.mark.parametrize("loss_a, loss_b, horizon, match", [
    (np.ones(5), np.ones(5), 0, r"horizon must be a positive integer \(bars ahead\), got 0"),
    (np.ones(5), np.ones(5), 2.0, r"horizon must be a positive integer \(bars ahead\), got 2.0"),
    (np.ones(5), np.ones(4), 1, r"1-D series of one length \(n,\), got shapes \(5,\) and \(4,\)"),
    (np.ones((5, 2)), np.ones((5, 2)), 1, r"1-D series of one length \(n,\), got shapes \(5, 2\)"),
    (np.ones(1), np.ones(1), 1, r"needs more samples than the horizon and at least 2 \(n > horizon, n >= 2\), "
                                r"got n=1 at horizon 1"),
    (np.ones(6), np.ones(6), 6, r"\(n > horizon, n >= 2\), got n=6 at horizon 6"),
    (np.array([1.0, np.nan, 2, 3]), np.ones(4), 1, r"losses must be finite, got 1 non-finite sample\(s\), the "
                                                   r"first at position 1"),
    (np.ones(4), np.array([1.0, 1, 1, np.inf]), 1, r"losses must be finite, got 1 .* at position 3"),
])
def test_diebold_mariano_rejects_bad_input(loss_a, loss_b, horizon, match):
    with pytest.raises(ValueError, match=match):
        diebold_mariano(loss_a, loss_b, horizon)
