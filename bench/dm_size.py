"""The Diebold-Mariano test's size and power by simulation: how often a 5% test rejects, old estimator and new.

Run by hand:  .venv/bin/python bench/dm_size.py [--reps 2000] [--seed 44]

Under the null, loss differentials are MA(h-1) with mean 0 (sums of h consecutive N(0, 1) shocks: what
overlapping h-step targets give), at h 1, 6, 12 and n 300, 1,500. Each statistic is computed on every
replication at once (model.diebold_mariano.dm_statistic on a (reps, n) array). Prints JSON, one entry per
(null, h, n), each a rejection rate at 5%:
  old          Bartlett weights over h - 1 lags + HLN + t(n-1): the estimator before issue 44 (inline below)
  new          the verdict: rectangular kernel over h - 1 lags + HLN + t(n-1), h = 1 where not positive
  new_fallback share of replications where the new one fell back to h = 1
  wide         diebold_mariano_wide's statistic: the new test at 2h (2h - 1 lags)
  bartlett_2h  Bartlett over 2h lags, no HLN: the wide statistic not chosen (see diebold_mariano_wide)
Nulls: "ma" (the MA(h-1) above: the test's assumption) and "persistent" (the shocks themselves AR(1) with
coefficient 0.9: a differential autocorrelated far past lag h - 1, as volatility losses often are, where the
h - 1 lag variance is too small: every test over-rejects, the wide statistic least). Then "power": the MA differentials
shifted by 3 standard errors of their mean (h / sqrt(n)), a's losses lower: how often each test finds it.
A simulation is an estimate: its standard error is sqrt(p (1 - p) / reps), 0.5 points at 5% and 2,000 reps.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.signal import lfilter

from model.diebold_mariano import autocovariances, dm_statistic, hln_factor, two_sided_pvalue

HORIZONS = (1, 6, 12)
SIZES = (300, 1500)
ALPHA = 0.05


def differentials(rng: np.random.Generator, reps: int, n: int, h: int, ar: float = 0.0) -> np.ndarray:
    """(reps, n) MA(h-1) differentials of mean 0: sums of h consecutive shocks, N(0, 1) or AR(1) with `ar`."""
    burn = 200 if ar else 0  # the AR(1) shocks start from 0: let them reach their stationary spread
    shocks = rng.standard_normal((reps, n + h - 1 + burn))  # (reps, n + h - 1 + burn)
    if ar:
        shocks = lfilter([1.0], [1.0, -ar], shocks, axis=-1)
    return np.lib.stride_tricks.sliding_window_view(shocks, h, axis=-1).sum(axis=-1)[:, -n:]  # (reps, n)


def bartlett_stat(d: np.ndarray, lags: int, hln_horizon: int | None) -> np.ndarray:
    """Newey-West (Bartlett weights 1 - k/(lags+1)) DM statistic of d (reps, n), times HLN's factor at
    `hln_horizon` (None: none). With lags h - 1 and HLN at h: the estimator before issue 44."""
    n = d.shape[-1]
    gammas = autocovariances(d, lags)  # (reps, lags + 1)
    weights = 1 - np.arange(1, lags + 1) / (lags + 1)  # (lags,)
    lrv = gammas[:, 0] + 2 * gammas[:, 1:] @ weights  # (reps,)
    factor = 1.0 if hln_horizon is None else hln_factor(n, hln_horizon)
    return d.mean(axis=-1) / np.sqrt(lrv / n) * np.sqrt(factor)  # (reps,)


def rejected(stat: np.ndarray, n: int) -> float:
    return round(float(np.mean(two_sided_pvalue(stat, n) < ALPHA)), 4)


def table(reps: int, seed: int) -> list[dict]:
    rows = []
    for null, ar in (("ma", 0.0), ("persistent", 0.9)):
        for h in HORIZONS:
            for n in SIZES:
                d = differentials(np.random.default_rng([seed, h, n, int(ar * 10)]), reps, n, h, ar)  # (reps, n)
                new, lags = dm_statistic(d, h)
                wide, _ = dm_statistic(d, 2 * h)
                rows.append({"null": null, "h": h, "n": n, "reps": reps,
                             "old": rejected(bartlett_stat(d, h - 1, h), n), "new": rejected(new, n),
                             "new_fallback": round(float(np.mean(lags < h - 1)), 4), "wide": rejected(wide, n),
                             "bartlett_2h": rejected(bartlett_stat(d, 2 * h, None), n)})
    for h in HORIZONS:  # power: a's losses lower by 3 standard errors of the mean differential (sd of d̄ = h / sqrt(n))
        for n in SIZES:
            d = differentials(np.random.default_rng([seed, h, n, 99]), reps, n, h) - 3 * h / np.sqrt(n)
            new, _ = dm_statistic(d, h)
            rows.append({"null": "power: shift of 3 se", "h": h, "n": n, "reps": reps,
                         "old": rejected(bartlett_stat(d, h - 1, h), n), "new": rejected(new, n),
                         "wide": rejected(dm_statistic(d, 2 * h)[0], n)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="replications per (null, h, n)")
    parser.add_argument("--seed", type=int, default=44)
    args = parser.parse_args()
    print(json.dumps({"alpha": ALPHA, "rows": table(args.reps, args.seed)}, indent=1))


if __name__ == "__main__":
    main()
