"""The Diebold-Mariano test: are two forecasts' losses on the same targets different beyond noise?

Of two forecasts of the same n targets, with per-sample losses a_t and b_t (squared errors), the
loss differential d_t = a_t - b_t has mean d̄; the null hypothesis is E[d_t] = 0. An h-step
target overlaps the next h - 1 targets, so d_t is autocorrelated up to lag h - 1, and its
long-run variance is estimated by Newey-West with Bartlett weights over L = h - 1 lags:

    gamma_k = (1/n) sum_{t=k}^{n-1} (d_t - d̄)(d_{t-k} - d̄)          k = 0..L
    lrv     = gamma_0 + 2 sum_{k=1}^{L} (1 - k/(L+1)) gamma_k          (never negative with these weights)
    DM      = d̄ / sqrt(lrv / n)
    DM*     = DM * sqrt((n + 1 - 2h + h(h-1)/n) / n)                   Harvey, Leybourne and Newbold (1997)
    p       = 2 P(T > |DM*|),  T ~ Student's t with n - 1 degrees of freedom

At h = 1 this is exactly the paired t-test. A negative statistic means a's losses are lower: a is
the better forecast. Diebold and Mariano (1995), "Comparing predictive accuracy".
"""

from __future__ import annotations

import math
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


def diebold_mariano(loss_a: np.ndarray, loss_b: np.ndarray, horizon: int) -> DieboldMariano:
    """Diebold-Mariano test, HLN-corrected, of two loss series (n,) on the same targets, `horizon` steps ahead.

    loss_a, loss_b: (n,) per-sample losses (e.g. squared errors) of two forecasts of the same n
    targets, in time order; horizon: bars each target looks ahead (overlap: horizon - 1 lags).

    Where the long-run variance is zero or negative, no noise is measured: identical losses (d_t all
    0) give stat 0 and p 1; a differential that is one non-zero constant gives stat +-inf (its sign)
    and p 0. With Bartlett weights the estimate is negative only through rounding of a near-constant
    differential, which is then treated as constant.

    Raises ValueError for a horizon that is not a positive integer, loss series that are not 1-D
    or not of one length, fewer samples than the rule n > horizon (and n >= 2) allows, and
    non-finite losses.
    """
    a, b = _checked(loss_a, loss_b, horizon)
    d = a - b  # (n,)
    n = len(d)
    mean = float(np.mean(d))
    lrv = 0.0 if np.ptp(d) == 0 else newey_west_variance(d, horizon - 1)  # exactly 0 for a constant d
    if lrv <= 0:
        stat = 0.0 if mean == 0 else math.copysign(math.inf, mean)
        return DieboldMariano(stat, 1.0 if stat == 0 else 0.0, n, mean)
    stat = mean / math.sqrt(lrv / n) * math.sqrt(hln_factor(n, horizon))
    return DieboldMariano(stat, two_sided_pvalue(stat, n), n, mean)


def newey_west_variance(d: np.ndarray, lags: int) -> float:
    """Long-run variance of d (n,) by Newey-West: gamma_0 + 2 sum_{k=1}^{lags} (1 - k/(lags+1)) gamma_k."""
    centred = d - d.mean()  # (n,)
    n = len(centred)
    gammas = [float(centred[k:] @ centred[:n - k]) / n for k in range(lags + 1)]  # autocovariances, lags 0..lags
    return gammas[0] + 2 * sum((1 - k / (lags + 1)) * gammas[k] for k in range(1, lags + 1))


def hln_factor(n: int, horizon: int) -> float:
    """(n + 1 - 2h + h(h-1)/n) / n = (n - h)(n - h + 1) / n^2: the square of HLN's small-sample correction."""
    h = horizon
    return (n + 1 - 2 * h + h * (h - 1) / n) / n


def two_sided_pvalue(stat: float, n: int) -> float:
    """P(|T| > |stat|) for T ~ Student's t with n - 1 degrees of freedom."""
    return float(2 * stats.t.sf(abs(stat), n - 1))


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
