"""Forecasts of registered models compared on new bars, next to HAR and persistence on the same samples.

The models were fitted on older bars; HAR must be fitted on something too, and not on the samples
it is scored on: it is fitted on the first `fit_fraction` of the new samples (in time), and every
forecast, the models' included, is scored on the rest. Losses are mean squared errors in the
target's own units (log volatility, log return or price), the units the models' forecasts are in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.bars import Bars
from model.baselines import fit_har, har_forecast, har_lookbacks, past_quantities
from model.features import target_and_persistence

MIN_SCORED = 16  # samples each side of the split: fewer say nothing


@dataclass(frozen=True)
class Comparison:
    losses: dict[str, float]  # each model's name, "har" and "persistence" -> MSE over the scored samples
    scored: np.ndarray  # (n_scored,) int64: the bars (indices) the scored samples end at
    target: np.ndarray  # (n_scored,) the actual target of those samples
    forecasts: dict[str, np.ndarray]  # name -> (n_scored,) its forecasts of them (models, har, persistence)
    n_fit: int  # samples HAR was fitted on


def compare_forecasts(bars: Bars, target: str, horizon: int, forecasts: dict[str, tuple[np.ndarray, np.ndarray]],
                      fit_fraction: float = 0.5) -> Comparison:
    """Score each model's forecasts, HAR and persistence on the samples every model forecast.

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
    every = {**{name: at[scored] for name, at in by_bar.items()},
             "har": har_forecast(past, fit_har(past, actual, fitted), scored), "persistence": persistence[scored]}
    truth = actual[scored]
    losses = {name: float(np.mean((values - truth) ** 2)) for name, values in every.items()}
    return Comparison(losses, scored, truth, every, len(fitted))
