"""A forecast's squared errors against a reference's on the same test samples: the loss ratio and the verdict.

The verdict is the Diebold-Mariano test over horizon - 1 lags (model/diebold_mariano.py); the same test over
2 * horizon - 1 lags stands beside it, so a reader sees when the verdict rests on the shorter bandwidth. A sweep's
look (tuning/sweep/one_look.py) and `train --look` (tuning/cli/train_look.py) keep these figures alike.
"""

from __future__ import annotations

import math

import numpy as np

from model.diebold_mariano import diebold_mariano, diebold_mariano_wide


def versus(errors: np.ndarray, reference: np.ndarray, horizon: int) -> dict[str, float]:
    """A forecast's squared errors (n_test,) against a reference's (n_test,): {test_loss (the reference's), ratio,
    dm_stat, dm_pvalue, dm_lags, dm_stat_wide, dm_pvalue_wide, dm_lags_wide}; a negative statistic: the forecast's
    errors are the smaller. dm_*: the verdict's test (horizon - 1 lags; dm_lags 0 where it fell back to h = 1);
    dm_*_wide: the same over 2 * horizon - 1 lags, beside it (model/diebold_mariano.py). NaN statistic, p-value
    and lags where a test cannot be made (no more test samples than its horizon, a non-finite error): the losses
    still stand."""
    reference_loss = float(np.mean(reference))
    judged = {"test_loss": reference_loss, "ratio": float(np.mean(errors)) / reference_loss if reference_loss
              else math.inf}
    for suffix, test in (("", diebold_mariano), ("_wide", diebold_mariano_wide)):
        try:
            result = test(errors, reference, horizon)
            figures = (result.stat, result.pvalue, result.lags_used)
        except ValueError:
            figures = (math.nan, math.nan, math.nan)
        judged.update(zip((f"dm_stat{suffix}", f"dm_pvalue{suffix}", f"dm_lags{suffix}"), figures, strict=True))
    return judged
