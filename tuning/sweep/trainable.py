"""One trial: a Tune function trainable that runs `model.train.fit` under Ray Train.

    Tune trial (run_trial) ── trainer.fit (tuning/sweep/trial_trainer.py) ──▶ workers (worker_entry.train_loop)
        each worker: tuning/sweep/trial_worker.py, the only part of a trial that imports torch: the
        shared dataset from the object store -> fit(report=...) -> ray.train.report(metrics, checkpoint)
        every epoch; the sweep's relay (tuning/sweep/report_relay.py) takes rank 0's reports to the Tune
        trial, where the scheduler reads them.

Ray Train V2's pattern, not the deprecated Tuner(trainer), on either trial path (tuning/sweep/trial_path.py).
Checkpoints live in Train's storage under the trial's id; a restarted worker (FailureConfig) or a resumed
sweep (same name, same storage) continues from the latest one.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import ray
import ray.train
import ray.tune

from tuning.search.gate import INVALID
from tuning.search.recipe import TrainingRecipe
from tuning.search.resources import TrialPlan
from tuning.search.space import with_params
from tuning.sweep.relay_callback import RelayReports
from tuning.sweep.report_relay import fit_reporting_to_tune
from tuning.sweep.trial_trainer import trial_trainer
from tuning.sweep.worker_entry import train_loop
from tuning.yaml_io import ConfigError


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of a sweep shares; built once by the sweep."""

    run: dict[str, Any]  # TrainingRecipe.to_dict(): the fixed data / model / train settings
    dataset: ray.ObjectRef  # the Dataset, loaded once by the sweep
    plan: TrialPlan
    relay: ray.actor.ActorHandle  # the sweep's ReportRelay: each trial's reports, from its Train controller to Tune
    storage: str  # Ray Train's storage for trial checkpoints (a path every node sees, or a URI)
    max_failures: int  # resources.max_failures: worker failures a trial survives (failure_config: preemptions apart)
    fast: bool  # the trial path (tuning/sweep/trial_path.py): the fast one, else Ray's public API alone
    # Trials the ledger holds as finished -> their last result. A driver killed outright (SIGKILL)
    # leaves Ray Tune's last saved state behind the ledger, and `resume` would run them again: they
    # report their recorded end at once instead.
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Confirmation runs on walk-forward folds past the first (tuning/sweep/confirmation.py): fold -> its Dataset.
    fold_datasets: dict[int, ray.ObjectRef] = field(default_factory=dict)
    # The bars, read once, when the space searches data settings (data.window, ...): each trial's workers build
    # its own Dataset from them (model/data.py dataset_from_bars); None: every trial shares `dataset`.
    bars: ray.ObjectRef | None = None
    # The fraction of its GPU's memory each packed trial worker (below one GPU a worker) is held to, from the memory
    # probe (tuning/sweep/memory_probe.py, kept in sweep.json); None: not held.
    memory_fraction: float | None = None


def run_trial(params: dict[str, Any], setup: TrialSetup) -> None:
    """Tune function trainable: launch one Ray Train run for this trial's parameters."""
    trial_id = ray.tune.get_context().get_trial_id()
    if trial_id in setup.finished:
        ray.tune.report(setup.finished[trial_id])
        return
    try:
        run = with_params(TrainingRecipe.from_dict(setup.run), params)
    except ConfigError as exc:  # a combination the recipe refuses (a headdim not dividing this d_model's width)
        ray.tune.report(invalid_result(str(exc)))  # ends as `invalid` before any worker starts: not a failure
        return
    if setup.plan.gpus_per_worker == 0:  # Ray does not hide GPUs from a worker that reserved none
        run = run.replace("train", device="cpu")
    trainer = trial_trainer(
        train_loop,
        {"run": run.to_dict(), "dataset": setup.fold_datasets.get(run.data.fold, setup.dataset), "bars": setup.bars,
         "storage": setup.storage, "trial_id": trial_id, "relay": setup.relay,
         "memory_fraction": held_fraction(setup)},
        setup.plan,
        ray.train.RunConfig(
            name=trial_id, storage_path=setup.storage,
            callbacks=[RelayReports(setup.relay, trial_id, hosted=setup.fast)],
            failure_config=failure_config(setup.max_failures),
            # The newest two: a trial the scheduler stops may write more before it is killed; the driver
            # reads the history of the one it stopped on, its best.pt from the snapshots (tuning/sweep/trial_files.py).
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2)),
        fast=setup.fast,
    )
    fit_reporting_to_tune(trainer.fit, setup.relay, trial_id, ray.tune.report)


def held_fraction(setup: TrialSetup) -> float | None:
    """The memory fraction a trial's workers are held to: the probe's, where they share a GPU (below one a worker;
    the probe gives none otherwise, and a plan that changed since, on resume, holds nothing it no longer shares);
    None where each has its GPU (or none)."""
    return setup.memory_fraction if 0 < setup.plan.gpus_per_worker < 1 else None


def failure_config(max_failures: int) -> ray.train.FailureConfig:
    """A trial's worker failures: `max_failures` of them survived. A preempted node (drained by the cloud's notice,
    then gone) is charged to a budget of its own, unlimited, where Ray Train has one (`max_preemption_failures`,
    Ray 2.58 on): a spot reclaim resumes the trial from its latest checkpoint and leaves max_failures for real
    failures. On an older Ray a preemption counts as a failure (docs/clusters.md)."""
    if "max_preemption_failures" in inspect.signature(ray.train.FailureConfig).parameters:
        return ray.train.FailureConfig(max_failures=max_failures, max_preemption_failures=-1)
    return ray.train.FailureConfig(max_failures=max_failures)


def invalid_result(why: str) -> dict[str, Any]:
    """The one result of a trial whose sampled combination the recipe refuses: Tune requires the metric, which
    is infinite (no model was trained); the scheduler stops it and the searcher tells Optuna PRUNED."""
    return {INVALID: why, "epoch": 0, "val_loss": float("inf"), "best_val_loss": float("inf")}
