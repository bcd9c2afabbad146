"""The cheap forecasts a model must beat, scored on the model's own samples in scaled target units.

  mean         the training targets' mean (0 in scaled units)
  persistence  the target's own quantity observed at the sample's last bar (model/features.py)
  har          least squares, fitted on the training samples alone, of the target on an intercept
               and the target's own quantity over the last L bars, for L in 1, h, 4h and 10h
               (h: the horizon; duplicates dropped when h is 1):
                 volatility  log Parkinson volatility of the last L bars: HAR-RV (Corsi, 2009)
                 return      log return over the last L bars
                 close       mean close of the last L bars
               It contains both other baselines (the intercept alone is the mean; the lookback h
               for volatility and return, 1 for close, is persistence), so on the training samples
               it is never worse than either: the yardstick, and the gate's default baseline.
               Near the series' start a lookback reaches back to bar 0 and no further.

HAR is fitted for the objective it is scored by (model/objectives.py), as the literature fits it:
  mse_log, mse  least squares in the target's units (log volatility: the regression above)
  mse_var       HAR-RV on variance levels: least squares of σ² on an intercept and the past variances
                exp(2 log vol_L); its forecast is floored at the smallest training σ² (a positive variance:
                below the smallest variance ever seen no forecast is sensible), then mapped to scaled log units
  qlike         the log-linear regression above with the coefficients that minimise the mean QLIKE over the
                training samples: Newton's method from the least-squares fit, halving a step that does not lower
                the loss (QLIKE is convex in the coefficients: exp of a linear function plus a linear one)
The variance of every HAR forecast is positive: exp of a finite log, or a level floored above 0.
Every baseline is scored by the objective's per-sample loss (scored_baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from model.features import TARGETS, trailing_log_volatility
from model.objectives import ObjectiveScale, mean_loss, scaled_log_volatility, variance_of

BASELINES = ("har", "persistence", "mean")
HAR_FITS = {"mse_log": "ols_log", "mse": "ols_log", "qlike": "qlike_log", "mse_var": "ols_variance"}
NEWTON_STEPS = 50  # QLIKE's fit: Newton iterations at most (it converges in a handful)
NEWTON_TOLERANCE = 1e-10  # ... stopping when a step lowers the mean QLIKE by less than this


def har_lookbacks(horizon: int) -> tuple[int, ...]:
    """The HAR regression's lookbacks in bars, shortest first."""
    return tuple(sorted({1, horizon, 4 * horizon, 10 * horizon}))


def past_quantities(close: np.ndarray, log_range: np.ndarray, target: str, lookbacks: tuple[int, ...]) -> np.ndarray:
    """(n_bars, n_lookbacks) float32: row i holds the target's quantity over bars i-L+1..i for each L.

    close: (n_bars,) closing prices; log_range: (n_bars,) log(high/low). A window that would start
    before bar 0 starts at bar 0.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    n = len(close)
    out = np.empty((n, len(lookbacks)), dtype=np.float32)
    bars = np.arange(n)
    if target == "return":
        log_close = np.log(close)
        for j, length in enumerate(lookbacks):
            out[:, j] = log_close - log_close[np.maximum(bars - length, 0)]
        return out
    if target == "volatility":
        return trailing_log_volatility(log_range, lookbacks)
    sums = np.concatenate([[0.0], np.cumsum(close.astype(np.float64))])  # sums[j]: bars 0..j-1
    for j, length in enumerate(lookbacks):
        start = np.maximum(bars + 1 - length, 0)
        out[:, j] = (sums[bars + 1] - sums[start]) / (bars + 1 - start)
    return out


def fit_har(past: np.ndarray, target: np.ndarray, train_index: np.ndarray) -> np.ndarray:
    """Least-squares coefficients (intercept, then one per lookback) -> (n_lookbacks + 1,) float64.

    past: (n_bars, n_lookbacks) from past_quantities; target: (n_bars,) scaled targets;
    train_index: (n_train,) the training samples' last input bars, the only rows it reads.
    """
    design = _design(past, train_index)  # (n_train, n_lookbacks + 1)
    coefficients, *_ = np.linalg.lstsq(design, target[train_index].astype(np.float64), rcond=None)
    return coefficients


def har_forecast(past: np.ndarray, coefficients: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n,) float64 HAR forecasts, scaled, of the samples ending at bars `index` (n,)."""
    return _design(past, index) @ coefficients


def scored_baselines(target: np.ndarray, persistence: np.ndarray, har: np.ndarray,
                     index: np.ndarray, objective: str = "mse_log",
                     scale: ObjectiveScale | None = None) -> dict[str, float]:
    """Mean loss, by `objective` (model/objectives.py), of each baseline over the samples ending at bars `index` (n,).

    target, persistence: (n_bars,) scaled; har: (n,) forecasts for exactly those samples; scale: the objective's
    (None: mse_log's or mse's, which need none). The default is the squared error in scaled units.
    """
    scale = scale or ObjectiveScale(0.0, 1.0)
    actual = target[index].astype(np.float64)

    def loss(forecast: np.ndarray) -> float:
        return mean_loss(objective, np.asarray(forecast, np.float64), actual, scale)

    return {
        "har": loss(har),
        "persistence": loss(persistence[index]),
        "mean": loss(np.zeros_like(actual)),  # the training mean is 0 in scaled units
    }


@dataclass(frozen=True)
class HarFit:
    """HAR fitted for one objective; `forecast` gives its scaled forecasts whatever the fit."""

    coefficients: np.ndarray  # (n_lookbacks + 1,) float64: intercept, then one per lookback
    fit: str  # "ols_log" (scaled log units) | "qlike_log" (the same form) | "ols_variance" (variance levels)
    variance_floor: float | None = None  # ols_variance: the smallest forecast variance (the smallest training σ²)

    def forecast(self, past: np.ndarray, index: np.ndarray, scale: ObjectiveScale) -> np.ndarray:
        """(n,) float64 scaled forecasts of the samples ending at bars `index` (n,); past: (n_bars, n_lookbacks)."""
        if self.fit != "ols_variance":
            return har_forecast(past, self.coefficients, index)
        levels = _variance_design(past, index) @ self.coefficients  # (n,) forecast variances, may be <= 0
        return scaled_log_volatility(np.maximum(levels, self.variance_floor), scale)

    def to_summary(self, lookbacks: tuple[int, ...]) -> dict[str, Any]:
        """data.summary["har"]: lookbacks and coefficients (as before objectives), and the fit where not OLS in logs."""
        summary: dict[str, Any] = {"lookbacks": list(lookbacks), "coefficients": self.coefficients.tolist()}
        if self.fit != "ols_log":
            summary["fit"] = self.fit
        if self.variance_floor is not None:
            summary["variance_floor"] = self.variance_floor
        return summary


def har_from_summary(har: dict[str, Any]) -> HarFit:
    """The HarFit a data.summary["har"] (or a checkpoint's data["har"]) describes; one without "fit" is OLS in logs."""
    return HarFit(np.asarray(har["coefficients"], dtype=np.float64), har.get("fit", "ols_log"),
                  har.get("variance_floor"))


def fit_har_for(objective: str, past: np.ndarray, target: np.ndarray, train_index: np.ndarray,
                scale: ObjectiveScale) -> HarFit:
    """HAR fitted on the training samples `train_index` (n_train,) as `objective` fits it (module docstring).

    past: (n_bars, n_lookbacks) from past_quantities; target: (n_bars,) scaled targets; scale: the objective's.
    """
    if objective not in HAR_FITS:
        raise ValueError(f"objective must be one of {', '.join(HAR_FITS)}, got {objective!r}")
    fit = HAR_FITS[objective]
    if fit == "ols_log":
        return HarFit(fit_har(past, target, train_index), fit)
    if fit == "qlike_log":
        return HarFit(_fit_qlike(past, target, train_index, scale), fit)
    variance = variance_of(target[train_index], scale)  # (n_train,) float64 σ²
    coefficients, *_ = np.linalg.lstsq(_variance_design(past, train_index), variance, rcond=None)
    return HarFit(coefficients, fit, float(variance.min()))


def _fit_qlike(past: np.ndarray, target: np.ndarray, train_index: np.ndarray, scale: ObjectiveScale) -> np.ndarray:
    """(n_lookbacks + 1,) log-linear HAR coefficients minimising the mean QLIKE on the training samples.

    With f = X b and u = 2 s (y - f): QLIKE = e^u - u - 1, gradient -2 s X'(e^u - 1) / n, Hessian
    4 s² X' diag(e^u) X / n (positive definite: the loss is convex in b). Newton from the OLS fit, a step
    halved until it lowers the loss.
    """
    design = _design(past, train_index)  # (n_train, n_lookbacks + 1)
    actual = target[train_index].astype(np.float64)  # (n_train,)
    b = fit_har(past, target, train_index)

    def loss(coefficients: np.ndarray) -> float:
        return mean_loss("qlike", design @ coefficients, actual, scale)

    current = loss(b)
    for _ in range(NEWTON_STEPS):
        ratio = np.exp(np.minimum(2 * scale.std * (actual - design @ b), 700.0))  # (n_train,) σ²/h
        gradient = -2 * scale.std * design.T @ (ratio - 1) / len(actual)  # (k,)
        hessian = 4 * scale.std**2 * (design * ratio[:, None]).T @ design / len(actual)  # (k, k)
        step, *_ = np.linalg.lstsq(hessian, gradient, rcond=None)
        for _ in range(30):  # halve until the loss falls
            trial = loss(b - step)
            if trial <= current:
                break
            step = step / 2
        else:
            break
        b, improved, current = b - step, current - trial, trial
        if improved < NEWTON_TOLERANCE:
            break
    return b


def _variance_design(past: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n, n_lookbacks + 1) float64: a column of ones, then the past variances exp(2 log vol) of rows `index` (n,)."""
    return np.column_stack([np.ones(len(index)), np.exp(2 * past[index].astype(np.float64))])


def _design(past: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n, n_lookbacks + 1) float64: a column of ones, then the rows `index` (n,) of past."""
    return np.column_stack([np.ones(len(index)), past[index].astype(np.float64)])
