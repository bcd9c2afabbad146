"""The Diebold-Mariano test: are two forecasts' losses on the same targets different beyond noise?

Of two forecasts of the same n targets, with per-sample losses a_t and b_t (squared errors), the
loss differential d_t = a_t - b_t has mean d̄; the null hypothesis is E[d_t] = 0. An h-step
target overlaps the next h - 1 targets, so d_t is autocorrelated up to lag h - 1 (an MA(h-1) for
optimal h-step forecasts), and its long-run variance is estimated as Diebold and Mariano do, with
the rectangular (truncated uniform) kernel over those h - 1 lags:

    gamma_k = (1/n) sum_{t=k}^{n-1} (d_t - d̄)(d_{t-k} - d̄)          k = 0..h-1
    lrv     = gamma_0 + 2 sum_{k=1}^{h-1} gamma_k                       (every lag at full weight)
    DM      = d̄ / sqrt(lrv / n)
    DM*     = DM * sqrt((n + 1 - 2h + h(h-1)/n) / n)                   Harvey, Leybourne and Newbold (1997)
    p       = 2 P(T > |DM*|),  T ~ Student's t with n - 1 degrees of freedom

This is R's forecast::dm.test (its default variance estimator). HLN's correction was derived for
this kernel. Bartlett weights (1 - k/h), used here before issue 44, shrink the autocovariances an
MA(h-1) certainly has, the variance comes out too small, and with HLN's factor on top a 5% test
rejected a true null about 11% of the time at h 6 and 12; the rectangular kernel rejects 5% to 6.6%
at h 1, 6, 12 and n 300, 1,500 (bench/dm_size.py).

The rectangular estimate is not always positive (sample autocovariances that sum to a negative
number). There, as dm.test does, the test falls back to h = 1: lrv = gamma_0 and HLN's factor at
h = 1, which is the paired t-test. It says so (`lags_used` 0, `fallback` True): lags whose sum is
negative are dropped, so gamma_0 is the larger variance and the fallback is conservative. A
non-positive estimate never becomes p = 0; only a differential that is exactly one non-zero
constant does (stat +-inf); identical losses give stat 0, p 1.

diebold_mariano_wide is the same test with twice the bandwidth (2h - 1 lags): a verdict that holds
there does not hang on the loss differential's persistence ending at lag h - 1.

At h = 1 this is exactly the paired t-test. A negative statistic means a's losses are lower: a is
the better forecast. Diebold and Mariano (1995), "Comparing predictive accuracy".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class DieboldMariano:
    """The outcome of diebold_mariano(loss_a, loss_b, horizon)."""

    stat: float  # DM*, HLN-corrected; < 0: loss_a lower (a better); +-inf when the differential is a non-zero constant
    pvalue: float  # two-sided, Student's t with n - 1 degrees of freedom; 1 for identical losses, 0 for +-inf
    n: int  # samples compared
    mean_differential: float  # mean(loss_a - loss_b), in the losses' units
    lags_used: int  # autocovariance lags in the variance: horizon - 1, or 0 after the fallback to h = 1
    fallback: bool  # the rectangular variance over horizon - 1 lags was not positive: the test is the h = 1 one


def diebold_mariano(loss_a: np.ndarray, loss_b: np.ndarray, horizon: int) -> DieboldMariano:
    """Diebold-Mariano test, HLN-corrected, of two loss series (n,) on the same targets, `horizon` steps ahead.

    loss_a, loss_b: (n,) per-sample losses (e.g. squared errors) of two forecasts of the same n
    targets, in time order; horizon: bars each target looks ahead (overlap: horizon - 1 lags).

    The variance is the rectangular kernel's over horizon - 1 lags; where that is not positive the
    test is the h = 1 one (lags_used 0, fallback True). Identical losses (d_t all 0) give stat 0 and
    p 1; a differential that is one non-zero constant gives stat +-inf (its sign) and p 0.

    Raises ValueError for a horizon that is not a positive integer, loss series that are not 1-D
    or not of one length, fewer samples than the rule n > horizon (and n >= 2) allows, and
    non-finite losses.
    """
    a, b = _checked(loss_a, loss_b, horizon)
    d = a - b  # (n,)
    stat, lags = dm_statistic(d, int(horizon))  # () and ()
    return DieboldMariano(float(stat), float(two_sided_pvalue(stat, len(d))), len(d), float(np.mean(d)),
                          int(lags), int(lags) < horizon - 1)


def diebold_mariano_wide(loss_a: np.ndarray, loss_b: np.ndarray, horizon: int) -> DieboldMariano:
    """The same test with twice the bandwidth: diebold_mariano at 2 * horizon (rectangular over 2h - 1 lags, HLN
    at 2h, the same fallback to h = 1), shown beside the verdict and never deciding it.

    Why: the verdict's variance counts autocorrelation up to lag h - 1 only, what overlapping targets
    cause. Squared errors of volatility forecasts are often persistent beyond that (errors cluster),
    and then that variance is too small and the verdict too eager. Twice the lags counts that
    persistence up to lag 2h - 1; where the verdict holds at h and not here, it depends on the
    differential's autocorrelation ending at lag h - 1. Why rectangular and not Bartlett: Bartlett
    weights shrink the first h - 1 lags, which are certainly there, so a Bartlett statistic over 2h
    lags rejects a true MA(h-1) null more often than the verdict (7-11% at 5%, bench/dm_size.py)
    and would be a check that is itself too eager; the rectangular kernel over 2h - 1 lags stays
    unbiased for the MA(h-1) and extends that to MA(2h-1), at the price of a noisier variance: it
    rejects a true MA(h-1) null 5-6% at n 1,500, 7% at h 6 and n 300, 10% at h 12 and n 300.

    Needs n > 2 * horizon; raises ValueError as diebold_mariano does."""
    return diebold_mariano(loss_a, loss_b, 2 * horizon)


def dm_statistic(d: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """DM* of loss differentials d (..., n) at `horizon`, and the lags its variance used (...): horizon - 1, or 0
    where the rectangular variance was not positive (the h = 1 fallback). Vectorised over leading dims, so a
    simulation computes every replication at once. A row that is one constant gives 0 (all zero) or +-inf."""
    n = d.shape[-1]
    mean = d.mean(axis=-1)  # (...)
    constant = np.ptp(d, axis=-1) == 0  # (...): exactly one value, no noise to measure
    scale = np.max(np.abs(d), axis=-1, keepdims=True)  # (..., 1): DM is scale-free; scaled, gamma_0 cannot underflow
    scaled = d / np.where(scale > 0, scale, 1.0)  # (..., n)
    gammas = autocovariances(scaled, horizon - 1)  # (..., h)
    lrv = rectangular_variance(gammas)  # (...)
    kept = lrv > 0  # (...): False -> fall back to h = 1
    lrv = np.where(kept, lrv, gammas[..., 0])  # gamma_0 > 0 for a non-constant row
    factor = np.where(kept, hln_factor(n, horizon), hln_factor(n, 1))  # (...)
    with np.errstate(divide="ignore", invalid="ignore"):  # constant rows: replaced below
        stat = scaled.mean(axis=-1) / np.sqrt(lrv / n) * np.sqrt(factor)  # (...)
    stat = np.where(constant, np.where(mean == 0, 0.0, np.copysign(np.inf, mean)), stat)
    return stat, np.where(kept | constant, horizon - 1, 0)


def autocovariances(d: np.ndarray, lags: int) -> np.ndarray:
    """gamma_k = (1/n) sum_{t=k}^{n-1} (d_t - d̄)(d_{t-k} - d̄) of d (..., n) for k = 0..lags -> (..., lags + 1)."""
    centred = d - d.mean(axis=-1, keepdims=True)  # (..., n)
    n = d.shape[-1]
    return np.stack([np.einsum("...t,...t->...", centred[..., k:], centred[..., :n - k]) / n
                     for k in range(lags + 1)], axis=-1)  # (..., lags + 1)


def rectangular_variance(gammas: np.ndarray) -> np.ndarray:
    """Long-run variance by the rectangular kernel: gamma_0 + 2 sum_{k>=1} gamma_k of gammas (..., L + 1) -> (...)."""
    return gammas[..., 0] + 2 * gammas[..., 1:].sum(axis=-1)


def hln_factor(n: int, horizon: int) -> float:
    """(n + 1 - 2h + h(h-1)/n) / n = (n - h)(n - h + 1) / n^2: the square of HLN's small-sample correction."""
    h = horizon
    return (n + 1 - 2 * h + h * (h - 1) / n) / n


def two_sided_pvalue(stat: float | np.ndarray, n: int) -> float | np.ndarray:
    """P(|T| > |stat|) for T ~ Student's t with n - 1 degrees of freedom; elementwise for an array (...)."""
    p = 2 * stats.t.sf(np.abs(stat), n - 1)
    return float(p) if np.ndim(p) == 0 else p


def _checked(loss_a: np.ndarray, loss_b: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """The two series as float64 (n,) arrays, or ValueError naming what is wrong and the rule."""
    if not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1:
        raise ValueError(f"horizon must be a positive integer (bars ahead), got {horizon!r}")
    a, b = (np.asarray(x, dtype=np.float64) for x in (loss_a, loss_b))
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"loss_a and loss_b must be 1-D series of one length (n,), got shapes {a.shape} "
                         f"and {b.shape}")
    n = len(a)
    if n < 2 or n <= horizon:
        raise ValueError(f"the Diebold-Mariano test needs more samples than the horizon and at least 2 "
                         f"(n > horizon, n >= 2), got n={n} at horizon {horizon}")
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if bad.any():
        raise ValueError(f"losses must be finite, got {int(bad.sum())} non-finite sample(s), the first at "
                         f"position {int(np.argmax(bad))}")
    return a, b
