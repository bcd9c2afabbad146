"""The objective: the loss every forecast is trained, validated, compared and tested by (DataConfig.objective).

Targets y and forecasts f are in scaled target units (model/data.py). For the volatility target that is the scaled
log Parkinson volatility, so with the Scaler's target mean m and std s:

  log σ = y s + m      σ² = exp(2(y s + m))      the realised variance proxy
  log √h = f s + m     h  = exp(2(f s + m))      the forecast variance

  mse_log   (f - y)²                                   squared error of log volatility (the default)
  mse_var   ((σ² - h) / v̄)²                            squared error of the variance, in units of v̄², the
                                                       training targets' mean variance (so it is ~ O(1))
  qlike     σ²/h - log(σ²/h) - 1 = e^u - u - 1,        Patton (2011); u = 2 s (y - f); >= 0, 0 iff h = σ²
  mse       (f - y)²                                   return and close targets, whose only objective it is

mse_var and QLIKE are Patton's robust losses: with a noisy proxy of the variance they rank forecasts as the
true variance would; mse_log can prefer a biased forecast.

Numerical safety (training starts far from the target): an exponent above EXP_CAP (σ²/h or σ²/v̄ above e^40,
about 2e17) continues linearly, exp(c)(1 + z - c), instead of overflowing; values and gradients below it are
exactly the formula's. QLIKE is then finite for any forecast; mse_var, a square, stays finite in float32 while the
exponent is below about 110 (σ²/h or h/σ² under e^110), further than any forecast a finite training run makes
(beyond it the loss is inf, and training stops as at any non-finite loss). QLIKE uses expm1(u) - u, accurate near
its minimum.

per_sample_loss and mean_loss take numpy arrays or torch tensors alike (torch stays unimported here until a
tensor arrives: the command line starts without it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

OBJECTIVES = ("mse_log", "mse_var", "qlike", "mse")
VARIANCE_OBJECTIVES = ("mse_log", "mse_var", "qlike")  # those of the volatility target; its default first
DEFAULT_OBJECTIVE = {"volatility": "mse_log", "return": "mse", "close": "mse"}
EXP_CAP = 40.0  # exponents above it continue linearly: finite losses and gradients for any forecast


@dataclass(frozen=True)
class ObjectiveScale:
    """What a loss needs besides forecast and target: the target's scaling and the training mean variance."""

    mean: float  # m: the Scaler's target_mean (log volatility for the volatility target)
    std: float  # s: the Scaler's target_std
    variance_mean: float = 1.0  # v̄: mean of exp(2 log σ) over the training targets; mse_var only (1: unused)


def allowed_objectives(target: str) -> tuple[str, ...]:
    """The objectives a target takes: a variance objective for volatility, mse for return and close."""
    return VARIANCE_OBJECTIVES if target == "volatility" else ("mse",)


def resolve_objective(objective: str | None, target: str) -> str:
    """`objective`, or the target's default where it is None; ValueError (one line) where it does not fit."""
    if objective is None:
        return DEFAULT_OBJECTIVE[target]
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)} (or unset: the target's default), "
                         f"got {objective!r}")
    if objective not in allowed_objectives(target):
        what = {"qlike": "QLIKE ranks variance forecasts", "mse_var": "mse_var scores variance forecasts",
                "mse_log": "mse_log scores log-volatility forecasts", "mse": "mse is for return and close"}[objective]
        fix = "use mse or target volatility" if target != "volatility" else "use mse_log, mse_var or qlike"
        raise ValueError(f"data.objective {objective}: {what}, and target {target} is not one; {fix}")
    return objective


def per_sample_loss(name: str, forecast: Any, target: Any, scale: ObjectiveScale) -> Any:
    """The objective `name`'s loss of each forecast: forecast, target (n,) or (n, k), scaled units -> the same shape.

    numpy arrays give float64 (at least), torch tensors float32 (at least; a bf16 forecast under autocast is
    computed in float32, as torch's mse_loss would). Shapes must match exactly: no broadcasting.
    """
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {name!r}")
    ops = _Ops.of(forecast)
    f, y = ops.real(forecast), ops.real(target)
    if tuple(f.shape) != tuple(y.shape):
        raise ValueError(f"forecast and target must have one shape, got {tuple(f.shape)} and {tuple(y.shape)}")
    if name in ("mse_log", "mse"):
        return (f - y) ** 2
    if name == "qlike":
        u = (2 * scale.std) * (y - f)  # log(σ²/h)
        return ops.capped_expm1(u) - u
    offset = 2 * scale.mean - math.log(scale.variance_mean)  # σ²/v̄ = exp(2 s y + offset)
    return (ops.capped_exp((2 * scale.std) * y + offset) - ops.capped_exp((2 * scale.std) * f + offset)) ** 2


def mean_loss(name: str, forecast: Any, target: Any, scale: ObjectiveScale) -> Any:
    """The mean of per_sample_loss over every element: a float for numpy, a 0-d tensor for torch."""
    losses = per_sample_loss(name, forecast, target, scale)
    return float(np.mean(losses)) if isinstance(losses, np.ndarray) else losses.mean()


def mean_variance(log_volatility: np.ndarray, target: str) -> float:
    """ObjectiveScale.variance_mean (v̄) of training targets (n,) in the target's own units: for volatility, the
    mean variance σ² = exp(2 log σ) in float64; 1.0 (unused) for the other targets."""
    if target != "volatility":
        return 1.0
    return float(np.mean(np.exp(2 * np.asarray(log_volatility).astype(np.float64))))


def variance_of(scaled: Any, scale: ObjectiveScale) -> Any:
    """σ² = exp(2(y s + m)) of scaled log volatilities (n,) -> (n,): a forecast's variance h, a target's proxy."""
    return _Ops.of(scaled).exp(2 * (_Ops.of(scaled).real(scaled) * scale.std + scale.mean))


def scaled_log_volatility(variance: np.ndarray, scale: ObjectiveScale) -> np.ndarray:
    """The inverse of variance_of: (log(h) / 2 - m) / s of positive variances (n,) -> (n,) float64."""
    return (0.5 * np.log(np.asarray(variance, dtype=np.float64)) - scale.mean) / scale.std


@dataclass(frozen=True)
class _Ops:
    """The few array operations the losses use, for numpy or torch."""

    torch: Any  # the torch module for tensors, None for numpy

    @classmethod
    def of(cls, x: Any) -> _Ops:
        if isinstance(x, np.ndarray) or np.isscalar(x):
            return cls(None)
        import torch

        if isinstance(x, torch.Tensor):
            return cls(torch)
        raise TypeError(f"forecast and target must be numpy arrays or torch tensors, got {type(x).__name__}")

    def real(self, x: Any) -> Any:
        """At least float64 (numpy) or float32 (torch)."""
        if self.torch is None:
            return np.asarray(x, dtype=np.promote_types(np.asarray(x).dtype, np.float64))
        return x if x.dtype in (self.torch.float32, self.torch.float64) else x.float()

    def exp(self, z: Any) -> Any:
        return np.exp(z) if self.torch is None else self.torch.exp(z)

    def capped_exp(self, z: Any) -> Any:
        """exp(z) for z <= EXP_CAP, exp(c)(1 + z - c) above: finite and increasing everywhere."""
        if self.torch is None:
            return np.where(z <= EXP_CAP, np.exp(np.minimum(z, EXP_CAP)), math.exp(EXP_CAP) * (1 + z - EXP_CAP))
        below = self.torch.exp(self.torch.clamp(z, max=EXP_CAP))  # clamped inside: no inf * 0 in the gradient
        return self.torch.where(z <= EXP_CAP, below, math.exp(EXP_CAP) * (1 + z - EXP_CAP))

    def capped_expm1(self, z: Any) -> Any:
        """expm1(z) for z <= EXP_CAP, continued linearly above (as capped_exp, minus 1)."""
        if self.torch is None:
            return np.where(z <= EXP_CAP, np.expm1(np.minimum(z, EXP_CAP)), math.exp(EXP_CAP) * (1 + z - EXP_CAP) - 1)
        below = self.torch.expm1(self.torch.clamp(z, max=EXP_CAP))
        return self.torch.where(z <= EXP_CAP, below, math.exp(EXP_CAP) * (1 + z - EXP_CAP) - 1)
