"""diebold_mariano: the statistic against hand computations, HLN's correction, the p-value, the fallback to h = 1, the
wide statistic, its size and power by simulation (vectorised), edge cases, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from torch.testing import assert_close

from model import diebold_mariano as dm_module
from model.diebold_mariano import DieboldMariano, diebold_mariano, diebold_mariano_wide


def test_diebold_mariano_identical_losses_are_stat_zero_and_p_one():
    losses = np.random.default_rng(0).random(50)
    assert diebold_mariano(losses, losses.copy(), horizon=3) == DieboldMariano(0.0, 1.0, 50, 0.0, 2, False)


@pytest.mark.parametrize("shift, sign", [(-0.5, -1), (0.5, 1)])
def test_diebold_mariano_constant_differential_is_infinite_with_p_zero(shift, sign):
    loss_b = np.arange(40) * 0.25  # exact in binary: d_t = shift for every t, no rounding
    result = diebold_mariano(loss_b + shift, loss_b, horizon=2)
    assert result.stat == sign * math.inf and result.pvalue == 0.0
    assert_close(result.mean_differential, shift)
    assert result.n == 40


def test_diebold_mariano_matches_a_hand_computation_with_the_rectangular_kernel():
    # h = 2, n = 6, d = a - b = [3, 3, 1, 1, 2, 2]; mean 2; centred [1, 1, -1, -1, 0, 0]
    # gamma_0 = (1 + 1 + 1 + 1 + 0 + 0) / 6 = 4/6                 (the naive variance)
    # gamma_1 = (1*1 + -1*1 + -1*-1 + 0*-1 + 0*0) / 6 = 1/6
    # lrv = gamma_0 + 2 * gamma_1 = 1                             (rectangular, lags 1..h-1 = 1, full weight)
    # DM = 2 / sqrt(1 / 6) = 2 sqrt(6); HLN: sqrt((6 - 2)(6 - 2 + 1) / 36) = sqrt(20) / 6
    # DM* = 2 sqrt(6) sqrt(20) / 6 = 2 sqrt(30) / 3 = 3.6515      (Bartlett, lrv = 4/6 + 1/6 = 5/6, gave 4)
    loss_b = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    loss_a = loss_b + np.array([3.0, 3.0, 1.0, 1.0, 2.0, 2.0])
    result = diebold_mariano(loss_a, loss_b, horizon=2)
    assert_close(result.stat, 2 * math.sqrt(30) / 3)
    assert_close(result.mean_differential, 2.0)
    assert (result.n, result.lags_used, result.fallback) == (6, 1, False)
    naive = 2 / math.sqrt((4 / 6) / 6) * math.sqrt(20) / 6  # what lag 0 alone would give
    assert abs(result.stat - naive) > 0.5
    assert_close(result.pvalue, float(2 * stats.t.sf(2 * math.sqrt(30) / 3, 5)))


@pytest.mark.parametrize("differential, expected", [
    # centred [1, -1, 1, -1, 1, -1]: gamma_0 = 1, gamma_1 = -5/6, rectangular lrv = 1 - 10/6 = -2/3 < 0.
    # h = 1: lrv = 1, DM = 2 / sqrt(1/6); HLN at h = 1: sqrt(5/6); DM* = 2 sqrt(5) (the paired t: sd^2 = 6/5)
    ([3.0, 1.0, 3.0, 1.0, 3.0, 1.0], 2 * math.sqrt(5)),
    # centred [1, -1, 0, 0, -2, 2]: gamma_0 = 10/6, gamma_1 = (-1 + 0 + 0 + 0 - 4)/6 = -5/6, lrv = 0 exactly.
    # h = 1: DM = 2 / sqrt((10/6) / 6) = 12 / sqrt(10); DM* = 12 / sqrt(10) * sqrt(5/6) = 2 sqrt(3)
    ([3.0, 1.0, 2.0, 2.0, 0.0, 4.0], 2 * math.sqrt(3)),
])
def test_diebold_mariano_non_positive_rectangular_variance_falls_back_to_horizon_one(differential, expected):
    loss_b = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    loss_a = loss_b + np.array(differential)
    result = diebold_mariano(loss_a, loss_b, horizon=2)
    assert (result.lags_used, result.fallback) == (0, True)  # recorded: the h = 1 test, not the h = 2 one
    assert_close(result.stat, expected)  # a finite statistic: never p = 0 for a noisy differential
    assert 0 < result.pvalue < 0.05
    assert_close(result.pvalue, float(stats.ttest_rel(loss_a, loss_b).pvalue))  # the h = 1 test is the paired t


def test_diebold_mariano_of_an_ma_differential_uses_its_autocovariances_up_to_lag_h_minus_1():
    h, n = 3, 400
    noise = np.random.default_rng(1).standard_normal(n + 2)
    d = 0.1 + noise[2:] + noise[1:-1] + noise[:-2]  # MA(2): overlapping 3-step sums, like h-step targets
    loss_b = np.random.default_rng(2).random(n)
    result = diebold_mariano(loss_b + d, loss_b, horizon=h)

    values = (loss_b + d - loss_b).tolist()  # the differential exactly as the function sees it
    mean = sum(values) / n
    gamma = [sum((values[t] - mean) * (values[t - k] - mean) for t in range(k, n)) / n for k in range(h)]
    lrv = gamma[0] + 2 * (gamma[1] + gamma[2])  # rectangular: both lags at full weight
    assert lrv > 1.5 * gamma[0]  # the overlap matters: the naive variance would be far too small
    expected = mean / math.sqrt(lrv / n) * math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    assert_close(result.stat, expected)
    assert_close(result.mean_differential, mean)
    assert (result.lags_used, result.fallback) == (2, False)


def test_diebold_mariano_hln_factor_scales_the_plain_statistic():
    n, h = 30, 4
    rng = np.random.default_rng(3)
    loss_a, loss_b = rng.random(n) + 0.1, rng.random(n)
    d = loss_a - loss_b
    lrv = float(dm_module.rectangular_variance(dm_module.autocovariances(d, h - 1)))
    assert lrv > 0  # no fallback here
    plain = d.mean() / math.sqrt(lrv / n)
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
    assert (result.lags_used, result.fallback) == (0, False)  # no lag to drop at h = 1


def test_diebold_mariano_wide_is_the_test_at_twice_the_horizon():
    rng = np.random.default_rng(6)
    loss_a, loss_b = rng.random(120) + 0.05, rng.random(120)
    wide = diebold_mariano_wide(loss_a, loss_b, horizon=3)
    assert wide == diebold_mariano(loss_a, loss_b, horizon=6)
    assert wide.lags_used in (5, 0) and wide.fallback == (wide.lags_used == 0)
    with pytest.raises(ValueError, match=r"\(n > horizon, n >= 2\), got n=120 at horizon 120"):
        diebold_mariano_wide(loss_a, loss_b, horizon=60)  # n > 2h needed


def test_dm_statistic_on_a_batch_equals_the_scalar_test_row_by_row():
    rng = np.random.default_rng(7)
    d = rng.standard_normal((5, 40)).cumsum(axis=1) * 0.1  # persistent rows
    d[1] = np.tile([1.0, -1.0], 20) + 0.3  # alternating: the rectangular variance is negative, falls back
    d[2] = 0.25  # a non-zero constant: +inf
    d[3] = 0.0  # identical losses: 0
    stat, lags = dm_module.dm_statistic(d, 4)  # (5,), (5,)
    pvalues = dm_module.two_sided_pvalue(stat, 40)  # (5,)
    assert stat.shape == lags.shape == pvalues.shape == (5,)
    for row in range(5):
        one = diebold_mariano(d[row], np.zeros(40), horizon=4)
        assert_close((float(stat[row]), float(pvalues[row])), (one.stat, one.pvalue))
        assert int(lags[row]) == one.lags_used
    assert [int(x) for x in lags] == [3, 0, 3, 3, 3] and stat[2] == math.inf and stat[3] == 0.0


def _ma_differentials(rng: np.random.Generator, reps: int, n: int, h: int) -> np.ndarray:
    """(reps, n) MA(h-1) loss differentials under the null E[d] = 0: sums of h consecutive N(0, 1) shocks, as
    the overlap of h-step targets makes them."""
    shocks = rng.standard_normal((reps, n + h - 1))  # (reps, n + h - 1)
    return np.lib.stride_tricks.sliding_window_view(shocks, h, axis=-1).sum(axis=-1)  # (reps, n)


def _rejection_rate(d: np.ndarray, h: int, alpha: float = 0.05) -> float:
    stat, _ = dm_module.dm_statistic(d, h)  # (reps,)
    return float(np.mean(dm_module.two_sided_pvalue(stat, d.shape[-1]) < alpha))


@pytest.mark.parametrize("h", [1, 6, 12])
@pytest.mark.parametrize("n, reps", [(300, 20_000), (1500, 4_000)])
def test_diebold_mariano_rejects_a_true_null_at_about_its_size(h, n, reps):
    # 5% test, MA(h-1) differentials with mean 0. The band [3.5%, 7%] is 3+ binomial standard errors from the
    # rates a 40,000-replication run gives (4.9% to 6.5%: 6.5% at h 12, n 300, HLN's known small-sample excess),
    # hence 20,000 replications at n 300; the old Bartlett + HLN estimator rejected about 10-11% at h 6 and 12.
    d = _ma_differentials(np.random.default_rng(44 + h * n), reps, n, h)
    assert 0.035 <= _rejection_rate(d, h) <= 0.07


def test_diebold_mariano_rejects_a_false_null_with_high_power():
    # mean shift 1.2 on MA(5) differentials of long-run sd 6: 1.2 / (6 / sqrt(300)) = 3.5 standard errors
    h, n = 6, 300
    d = _ma_differentials(np.random.default_rng(45), 2_000, n, h) - 1.2  # a's losses lower: a better
    assert _rejection_rate(d, h) > 0.8
    stat, _ = dm_module.dm_statistic(d, h)
    assert np.mean(stat < 0) > 0.99  # and it says which way


@pytest.mark.parametrize("stat, n", [(0.0, 10), (1.3, 10), (-2.5, 40), (7.0, 200)])
def test_two_sided_pvalue_matches_student_t_with_n_minus_1_degrees_of_freedom(stat, n):
    assert_close(dm_module.two_sided_pvalue(stat, n), float(2 * (1 - stats.t.cdf(abs(stat), n - 1))))


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
