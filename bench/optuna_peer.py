"""The same search as a sweep, written by hand with Optuna alone: the peer bench/sweep_overhead.py compares with.

One process, no Ray, no tracking: Optuna's TPE (the sweep's sampler settings, the space's initial points
first) with a successive-halving pruner on the space's grace period and reduction factor, the space's gate
at its epoch, then the space's confirmation runs (each finalist again on the other seeds and folds, to its
last epoch), all calling the same `model.train.fit` on the same bars. What a user would write instead of
mamba-tune; its wall time is what Ray's orchestration is measured against.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import optuna

from model.data import Dataset, load_dataset
from model.train import fit
from tuning.search.gate import gate_decision
from tuning.search.searcher import optuna_space
from tuning.search.space import SweepSpace, with_params


class _Stop(Exception):
    """Raised from fit's report to end a trial the pruner or the gate stops."""


@dataclasses.dataclass
class PeerTrial:
    params: dict[str, Any]
    best_val_loss: float
    epochs: int  # epochs trained (E0 not counted)
    stop: str  # completed | asha | gate | nan
    train_s: float  # wall seconds inside fit


def search_by_hand(space: SweepSpace, data: Dataset, trials: int) -> list[PeerTrial]:
    """`trials` trials of the space's search, sequentially in this process; -> each trial, in order."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=space.seed, n_startup_trials=max(2, min(10, space.trials // 4)),
                                           multivariate=True),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=space.scheduler.grace_period,
                                                      reduction_factor=space.scheduler.reduction_factor))
    for point in space.initial:
        study.enqueue_trial(dict(point))
    distributions, done = optuna_space(space), []
    for _ in range(trials):
        trial = study.ask(distributions)
        result = _train(space, data, trial.params, trial)
        done.append(result)
        state = optuna.trial.TrialState.COMPLETE if result.stop == "completed" else (
            optuna.trial.TrialState.FAIL if result.stop == "nan" else optuna.trial.TrialState.PRUNED)
        study.tell(trial, result.best_val_loss if state == optuna.trial.TrialState.COMPLETE else None, state=state)
    return done


def confirm_by_hand(space: SweepSpace, data_path: str, data: Dataset, search: list[PeerTrial]) -> list[PeerTrial]:
    """The confirmation runs of the space's `confirm`: each of the top_k completed trials on every (seed, fold)
    but its own, to the last epoch."""
    if space.confirm is None:
        return []
    completed = sorted((t for t in search if t.stop == "completed" and math.isfinite(t.best_val_loss)),
                       key=lambda t: t.best_val_loss)[:space.confirm.top_k]
    seeds = (space.run.train.seed, *space.confirm.seeds)
    folds = {1: data, **{fold: load_dataset(data_path, dataclasses.replace(space.run.data, fold=fold))
                         for fold in range(2, space.confirm.folds + 1)}}
    return [_train(space, folds[fold], {**finalist.params, "seed": seed}, None)
            for finalist in completed for fold in folds for seed in seeds if (seed, fold) != (seeds[0], 1)]


def _train(space: SweepSpace, data: Dataset, params: dict[str, Any], trial: optuna.Trial | None) -> PeerTrial:
    """One fit of the space's run with `params`; with `trial`, the pruner and the gate may stop it."""
    run = with_params(space.run, params).replace("train", device="cpu")
    seen: list[dict[str, Any]] = []

    def report(metrics: dict[str, Any], checkpoint: Any) -> None:
        seen.append(metrics)
        epoch = metrics["epoch"]
        if trial is None or epoch == 0:
            return
        if gate_decision(space.gate, epoch, metrics["val_loss"], metrics["e0_val_loss"],
                         space.gate.baseline_of(metrics)) == "gate":
            raise _Stop("gate")
        trial.report(metrics["best_val_loss"], epoch)
        if epoch < space.scheduler.max_epochs and trial.should_prune():
            raise _Stop("asha")

    start, stop = time.perf_counter(), "completed"
    try:
        result = fit(run.train, run.model, data, report=report)
        stop = "nan" if result.status == "nan" else "completed"
    except _Stop as why:
        stop = str(why)
    best = min((m["val_loss"] for m in seen if math.isfinite(m["val_loss"])), default=math.inf)
    return PeerTrial(params, best, seen[-1]["epoch"] if seen else 0, stop, time.perf_counter() - start)
