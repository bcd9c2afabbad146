"""A forecast's per-sample losses against a reference's on the same test samples: the loss ratio and the verdict.

The losses are the objective's (model/objectives.py: squared errors under mse_log and mse, QLIKE, the variance's
squared error), the same objective for both series (model/holdout.py gives them so).

The verdict is the Diebold-Mariano test over horizon - 1 lags (model/diebold_mariano.py); the same test over
2 * horizon - 1 lags stands beside it, so a reader sees when the verdict rests on the shorter bandwidth. A sweep's
look (tuning/sweep/one_look.py), `train --look` (tuning/cli/train_look.py) and `promote` (tuning/tracking/promotion.py)
keep these figures alike, each with the horizon `overlap` gives.
"""

from __future__ import annotations

import math

import numpy as np

from model.diebold_mariano import diebold_mariano, diebold_mariano_wide


def overlap(target: str, horizon: int) -> int:
    """The horizon a Diebold-Mariano test of `target`'s forecast errors takes: the bars each target overlaps with
    the next ones, plus itself. A target over the next `horizon` bars (realised volatility) shares horizon - 1 of
    them with the next sample's: `horizon`; a close target is one bar ahead and overlaps none: 1."""
    return 1 if target == "close" else horizon


def versus(errors: np.ndarray, reference: np.ndarray, horizon: int) -> dict[str, float]:
    """A forecast's per-sample losses (n_test,) against a reference's (n_test,), by one objective: {test_loss (the
    reference's), ratio, dm_stat, dm_pvalue, dm_lags, dm_fallback, dm_stat_wide, dm_pvalue_wide, dm_lags_wide,
    dm_fallback_wide}; a negative statistic: the forecast's losses are the smaller. dm_*: the verdict's test
    (horizon - 1 lags); dm_*_wide: the same over 2 * horizon - 1 lags, beside it (model/diebold_mariano.py).
    dm_fallback 1.0 where the test fell back to h = 1 (its variance over the lags was not positive: dm_lags 0),
    0.0 where it did not (at horizon 1, dm_lags is 0 either way: the flag tells them apart). NaN statistic,
    p-value, lags and fallback where a test cannot be made (no more test samples than its horizon, a non-finite
    loss): the losses still stand."""
    reference_loss = float(np.mean(reference))
    judged = {"test_loss": reference_loss, "ratio": float(np.mean(errors)) / reference_loss if reference_loss
              else math.inf}
    for suffix, test in (("", diebold_mariano), ("_wide", diebold_mariano_wide)):
        try:
            result = test(errors, reference, horizon)
            figures = (result.stat, result.pvalue, result.lags_used, float(result.fallback))
        except ValueError:
            figures = (math.nan, math.nan, math.nan, math.nan)
        judged.update(zip((f"dm_stat{suffix}", f"dm_pvalue{suffix}", f"dm_lags{suffix}", f"dm_fallback{suffix}"),
                          figures, strict=True))
    return judged
