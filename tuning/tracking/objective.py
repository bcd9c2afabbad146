"""The objective a run's losses are in, as MLflow records it: a tag, and one metric key per objective.

    tag      OBJECTIVE_TAG (mamba_tune.objective) = mse_log | mse_var | qlike | mse, on a sweep's parent run, each
             trial and confirmation run, each production (`train --register`, `best --register`) run and model
             version
    metrics  every loss value under <metric>_<objective> (LOSS_METRICS: val_loss_qlike, best_val_loss_mse_var,
             test_loss_mse_log, test_baseline_har_qlike, ...): runs of different objectives never share a key, so
             MLflow's charts and comparisons never put a QLIKE beside an MSE. Other metrics (lr, overfit_ratio,
             epoch_s, n_test, the verdict's ratios and Diebold-Mariano statistics) keep their names.

A run recorded before objectives existed has no tag and unsuffixed keys (val_loss): it reads as its target's
default objective (mse_log for volatility, mse for return and close), its losses under the old keys. A sweep whose
parent run is such a run keeps those keys when it is resumed (tuning/tracking/runs.py, SweepTracking.keys), so that
each of its curves stays under one key.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.objectives import DEFAULT_OBJECTIVE

OBJECTIVE_TAG = "mamba_tune.objective"
TITLES = {"mse_log": "MSE of log volatility", "mse_var": "MSE of variance", "qlike": "QLIKE",
          "mse": "MSE"}  # what printed text calls each objective's loss
LEGACY = "mse_log"  # what a run without the tag (and without a known target) was ranked by
LOSS_METRICS = frozenset({
    "train_loss", "val_loss", "best_val_loss",  # each epoch's (store.py EPOCH_METRICS); the sweep's best
    "test_loss", "test_baseline_har", "test_baseline_persistence", "test_baseline_mean",  # a look at the test segment
    "loss_challenger", "loss_champion", "loss_har", "loss_persistence",  # a promote run's (promotion.py)
})


def default_objective(target: str | None) -> str:
    """The target's own objective: mse for return and close, mse_log for volatility (and when not known)."""
    return DEFAULT_OBJECTIVE.get(target, LEGACY)


def recorded_objective(tags: Mapping[str, str], target: str | None = None) -> str:
    """The objective a run or model version recorded (OBJECTIVE_TAG); without the tag, `target`'s default."""
    return tags.get(OBJECTIVE_TAG) or default_objective(target)


def metric_key(name: str, objective: str | None) -> str:
    """The MLflow key of metric `name`: <name>_<objective> for a loss (LOSS_METRICS), `name` itself otherwise and
    where `objective` is None (the keys of runs recorded before objectives)."""
    return f"{name}_{objective}" if objective is not None and name in LOSS_METRICS else name


def keyed(metrics: Mapping[str, float], objective: str | None) -> dict[str, float]:
    """`metrics` under their MLflow keys (metric_key)."""
    return {metric_key(name, objective): value for name, value in metrics.items()}


def title(objective: str) -> str:
    """How printed text names the objective's loss: "QLIKE", "MSE of log volatility"."""
    return TITLES.get(objective, objective)


def loss_units(objective: str) -> str:
    """The units of the objective's losses, for printed text and axes: "MSE of log volatility, scaled units",
    "MSE of variance, in units of the mean training variance squared", "QLIKE"."""
    if objective in ("mse_log", "mse"):
        return f"{title(objective)}, scaled units"
    if objective == "mse_var":
        return f"{title(objective)}, in units of the mean training variance squared"
    return title(objective)
