"""The PNGs logged to MLflow: a trial's loss curves; a sweep's val_loss curves and val_loss per hyperparameter.

Losses are in the units of the run's objective (tuning/tracking/objective.py: MSE of scaled log volatility by default,
the training targets' variance being 1), drawn on a log axis; the axis names the objective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from tuning.search.ledger import TrialRecord  # noqa: E402
from tuning.search.searchable import value_of_setting  # noqa: E402
from tuning.tracking.objective import LEGACY, loss_units  # noqa: E402

REASON_COLOURS = {"completed": "tab:green", "asha": "tab:orange", "gate": "tab:red", "nan": "tab:purple",
                  "error": "tab:gray", "invalid": "tab:olive"}
HYPERPARAMETERS = (("learning_rate", True), ("weight_decay", True), ("batch_size", True))  # (name, log axis)


def loss_curve(history: Sequence[dict[str, Any]], path: Path, heading: str, objective: str = LEGACY) -> Path:
    """train_loss and val_loss per epoch (epoch 0: before training), the best epoch and the persistence baseline."""
    epochs = [m["epoch"] for m in history]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(epochs, [_positive(m["train_loss"]) for m in history], "o-", ms=3, label="train_loss")
    ax.plot(epochs, [_positive(m["val_loss"]) for m in history], "o-", ms=3, label="val_loss")
    if history:
        last = history[-1]
        ax.axhline(last["baseline_persistence"], ls="--", c="gray", lw=1, label="persistence baseline")
        ax.axvline(last["best_epoch"], ls=":", c="tab:green", lw=1, label=f"best epoch {last['best_epoch']}")
    _finish(fig, ax, path, heading, "epoch", f"loss ({loss_units(objective)})")
    return path


def sweep_curves(records: Sequence[TrialRecord], path: Path, heading: str, objective: str = LEGACY) -> Path:
    """Every trial's val_loss per epoch, coloured by why it ended."""
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for record in records:
        curve = [_positive(v) for v in record.val_curve]
        ax.plot(range(len(curve)), curve, "-", lw=1.2, alpha=0.8, c=REASON_COLOURS.get(record.stop_reason, "k"))
    _legend_by_reason(ax, records)
    _finish(fig, ax, path, heading, "epoch", f"val_loss ({loss_units(objective)})")
    return path


def loss_by_hyperparameter(records: Sequence[TrialRecord], path: Path, heading: str, objective: str = LEGACY) -> Path:
    """Each trial's best val_loss against each searched hyperparameter, coloured by why it ended."""
    fig, axes = plt.subplots(1, len(HYPERPARAMETERS), figsize=(12, 4), sharey=True)
    for ax, (name, log_x) in zip(axes, HYPERPARAMETERS, strict=True):
        points = [(value_of_setting(r.params, name), r.best_val_loss, r.stop_reason) for r in records
                  if value_of_setting(r.params, name) is not None and math.isfinite(r.best_val_loss)
                  and r.best_val_loss > 0]  # by either of its names: learning_rate or train.lr
        for x, y, reason in points:
            ax.scatter(x, y, c=REASON_COLOURS.get(reason, "k"), s=28)
        if log_x and points:
            ax.set_xscale("log", base=2 if name == "batch_size" else 10)
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"best val_loss ({loss_units(objective)})")
    axes[0].set_yscale("log")
    _legend_by_reason(axes[-1], records)
    fig.suptitle(heading)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _legend_by_reason(ax: Any, records: Sequence[TrialRecord]) -> None:
    for reason in REASON_COLOURS:
        count = sum(r.stop_reason == reason for r in records)
        if count:
            ax.plot([], [], "-", c=REASON_COLOURS[reason], label=f"{reason} ({count})")
    if records:
        ax.legend(fontsize=8)


def importance_bars(importances: dict[str, float], path: Path, title: str) -> Path:
    """Each searched hyperparameter's fANOVA importance (its share of the variance of the val_loss explained)."""
    names = list(importances)[::-1]  # the largest on top
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(names) + 1.6))
    ax.barh(names, [importances[name] for name in names], color="tab:blue")
    ax.set_xlim(0, 1)
    ax.set_xlabel("importance (share of the val_loss variance, fANOVA)")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _finish(fig: Any, ax: Any, path: Path, heading: str, xlabel: str, ylabel: str) -> None:
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(heading)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _positive(value: float) -> float:
    """Non-finite or non-positive losses are left out of a log axis (NaN breaks the line there)."""
    return value if math.isfinite(value) and value > 0 else math.nan
