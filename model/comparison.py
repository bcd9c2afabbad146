"""Forecasts of registered models compared on new bars, next to HAR and persistence on the same samples.

The models were fitted on older bars; HAR must be fitted on something too, and not on the samples
it is scored on: it is fitted on the first `fit_fraction` of the new samples (in time), and every
forecast, the models' included, is scored on the rest. Losses are the objective's (model/objectives.py) of
forecasts in the target's own units (log volatility, log return or price), the units the models' forecasts
are in: mean squared errors under mse_log and mse; QLIKE and mse_var read the variance exp(2 log σ) (their
scale: mean 0, std 1, and v̄ the mean variance of the samples HAR is fitted on). HAR is fitted as the
objective fits it (model/baselines.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.bars import Bars
from model.baselines import fit_har_for, har_lookbacks, past_quantities
from model.features import target_and_persistence
from model.objectives import ObjectiveScale, mean_variance, per_sample_loss, resolve_objective

MIN_SCORED = 16  # samples each side of the split: fewer say nothing


@dataclass(frozen=True)
class Comparison:
    losses: dict[str, float]  # each model's name, "har", "persistence" -> mean loss (the objective's) when scored
    scored: np.ndarray  # (n_scored,) int64: the bars (indices) the scored samples end at
    target: np.ndarray  # (n_scored,) the actual target of those samples
    forecasts: dict[str, np.ndarray]  # name -> (n_scored,) its forecasts of them (models, har, persistence)
    n_fit: int  # samples HAR was fitted on
    objective: str  # the loss of `losses` and `per_sample` (model/objectives.py)
    per_sample: dict[str, np.ndarray]  # name -> (n_scored,) its per-sample losses, for a DM test


def compare_forecasts(bars: Bars, target: str, horizon: int, forecasts: dict[str, tuple[np.ndarray, np.ndarray]],
                      fit_fraction: float = 0.5, objective: str | None = None) -> Comparison:
    """Score each model's forecasts, HAR and persistence on the samples every model forecast.

    objective: the loss (model/objectives.py; None: the target's default, mse_log for volatility), which also
    says how HAR is fitted; ValueError where it does not fit the target.

    forecasts: name -> (timestamps (n,) int64 ns of the bar each forecast is made at, forecasts (n,));
    raises ValueError when fewer than MIN_SCORED samples are left on either side of the split.
    """
    log_range = np.log(bars.high) - np.log(bars.low)
    actual, persistence = target_and_persistence(bars.close, log_range, target, horizon)
    by_bar = {}
    common = np.isfinite(actual) & np.isfinite(persistence)
    for name, (timestamps, values) in forecasts.items():
        at = np.full(len(bars), np.nan)
        at[np.searchsorted(bars.timestamp, timestamps)] = values  # each forecast at the bar it was made
        by_bar[name] = at
        common &= np.isfinite(at)
    samples = np.flatnonzero(common)
    n_fit = int(len(samples) * fit_fraction)
    if min(n_fit, len(samples) - n_fit) < MIN_SCORED:
        raise ValueError(f"{len(samples)} samples have a forecast from every model and a known target, too few to "
                         f"fit HAR on {fit_fraction:.0%} of them and score the rest (at least {MIN_SCORED} each)")
    fitted, scored = samples[:n_fit], samples[n_fit:]
    past = past_quantities(bars.close, log_range, target, har_lookbacks(horizon))
    # HAR's last fitted target ends `horizon` bars after its sample: only samples ending before the first scored one.
    fitted = fitted[fitted + horizon < scored[0]]
    objective = resolve_objective(objective, target)
    scale = ObjectiveScale(0.0, 1.0, mean_variance(actual[fitted], target))  # forecasts, targets in their own units
    har = fit_har_for(objective, past, actual, fitted, scale)
    every = {**{name: at[scored] for name, at in by_bar.items()},
             "har": har.forecast(past, scored, scale), "persistence": persistence[scored]}
    truth = actual[scored]
    per_sample = {name: per_sample_loss(objective, np.asarray(values, np.float64), truth.astype(np.float64), scale)
                  for name, values in every.items()}  # each (n_scored,)
    losses = {name: float(np.mean(values)) for name, values in per_sample.items()}
    return Comparison(losses, scored, truth, every, len(fitted), objective, per_sample)
