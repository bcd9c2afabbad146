"""One trial: a Tune function trainable that runs `model.train.fit` under Ray Train.

    Tune trial (run_trial, the driver) ── TorchTrainer.fit ──▶ workers (train_worker)
        each worker: the shared dataset from the object store -> fit(report=...) ->
        ray.train.report(metrics, checkpoint) every epoch; TuneReportCallback relays
        rank 0's reports to the Tune trial, where the scheduler reads them.

Ray Train 2.60's pattern (Train V2), not the deprecated Tuner(trainer). Checkpoints live
in Train's storage under the trial's id; a restarted worker (FailureConfig) or a resumed
sweep (same name, same storage) continues from the latest one.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import ray.train
import ray.tune
from ray.train.torch import TorchTrainer
from ray.tune.integration.ray_train import TuneReportCallback

from model.atomic import write_text_atomic
from model.train import fit
from tuning.search.recipe import TrainingRecipe
from tuning.search.resources import TrialPlan
from tuning.search.space import with_params
from tuning.sweep.trial_files import HISTORY, save_best_snapshot, storage_filesystem

CHECKPOINT_FILES = ("last.pt", "best.pt", HISTORY)


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of a sweep shares; built once by the sweep."""

    run: dict[str, Any]  # TrainingRecipe.to_dict(): the fixed data / model / train settings
    dataset: ray.ObjectRef  # the Dataset, loaded once by the sweep
    plan: TrialPlan
    storage: str  # Ray Train's storage for trial checkpoints (a path every node sees, or a URI)
    max_failures: int  # resources.max_failures: worker failures a trial survives (preemptions are not counted)
    # Trials the ledger holds as finished -> their last result. A driver killed outright (SIGKILL)
    # leaves Ray Tune's last saved state behind the ledger, and `resume` would run them again: they
    # report their recorded end at once instead.
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Confirmation runs on walk-forward folds past the first (tuning/sweep/confirmation.py): fold -> its Dataset.
    fold_datasets: dict[int, ray.ObjectRef] = field(default_factory=dict)


def run_trial(params: dict[str, Any], setup: TrialSetup) -> None:
    """Tune function trainable: launch one TorchTrainer for this trial's parameters."""
    trial_id = ray.tune.get_context().get_trial_id()
    if trial_id in setup.finished:
        ray.tune.report(setup.finished[trial_id])
        return
    run = with_params(TrainingRecipe.from_dict(setup.run), params)
    if setup.plan.gpus_per_worker == 0:  # Ray does not hide GPUs from a worker that reserved none
        run = run.replace("train", device="cpu")
    trainer = TorchTrainer(
        train_worker,
        train_loop_config={"run": run.to_dict(), "dataset": setup.fold_datasets.get(run.data.fold, setup.dataset),
                           "storage": setup.storage,
                           "trial_id": trial_id},
        scaling_config=ray.train.ScalingConfig(
            num_workers=setup.plan.workers, use_gpu=setup.plan.gpus_per_worker > 0,
            resources_per_worker=setup.plan.worker_resources()),
        run_config=ray.train.RunConfig(
            name=trial_id, storage_path=setup.storage, callbacks=[TuneReportCallback()],
            # A preempted node (drained by the cloud's notice, then gone) is charged to its own budget, unlimited:
            # a spot reclaim resumes the trial from its latest checkpoint and leaves max_failures for real failures.
            failure_config=ray.train.FailureConfig(max_failures=setup.max_failures, max_preemption_failures=-1),
            # The newest two: a trial the scheduler stops may write more before it is killed; the driver
            # reads the history of the one it stopped on, its best.pt from the snapshots (tuning/sweep/trial_files.py).
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2)),
    )
    trainer.fit()


def train_worker(config: dict[str, Any]) -> None:
    """Ray Train worker: fit() with its reports going to Ray Train, resuming from the latest checkpoint."""
    run = TrainingRecipe.from_dict(config["run"])
    data = ray.get(config["dataset"])  # zero-copy views of the object store's arrays
    rank = ray.train.get_context().get_world_rank()
    storage, trial_id = config.get("storage"), config.get("trial_id")
    fs = storage_filesystem(storage) if storage and rank == 0 else None
    local = Path(tempfile.mkdtemp(prefix="mamba-tune-trial-"))
    try:
        resume = _restore_latest(local)
        history = json.loads((local / HISTORY).read_text()) if resume and (local / HISTORY).exists() else []

        def report(metrics: dict[str, Any], checkpoint: Path | None) -> None:
            keep = rank == 0 and checkpoint is not None  # one copy of the checkpoint, from rank 0
            history.append(metrics)
            if keep:
                write_text_atomic(local / HISTORY, json.dumps(history))
            if keep and fs is not None and metrics["best_epoch"] == metrics["epoch"]:  # before the driver hears of it
                save_best_snapshot(fs, local / "best.pt", storage, trial_id, metrics["epoch"])
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(local) if keep else None)

        reported_before = len(history)
        result = fit(run.train, run.model, data, report=report, checkpoint_dir=local, resume=resume)
        if len(history) == reported_before and history and result.status != "nan":
            # Resumed from a checkpoint at the trial's end (its driver was killed after the trial finished,
            # before Tune saved that): nothing new to train. Its last epoch again, so Tune hears how it ended;
            # the epoch is not trained twice (epoch_s 0) and MLflow keeps a step it holds (tuning/tracking/log.py).
            ray.train.report({**history[-1], "epoch_s": 0.0})
        if result.status == "nan":  # fit saved nothing from the diverged epoch: say so, the scheduler stops it
            last = result.history[-1] if result.history else {  # E0 itself was non-finite
                "best_val_loss": math.inf, "e0_val_loss": math.nan, "best_epoch": 0, **data.baseline_metrics()}
            ray.train.report({**last, "epoch": result.stop_epoch, "train_loss": math.nan, "val_loss": math.nan})
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _restore_latest(local: Path) -> bool:
    """Copy the latest checkpoint's files into `local`; True when there was one."""
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return False
    with checkpoint.as_directory() as folder:
        for name in CHECKPOINT_FILES:
            if (Path(folder) / name).exists():
                shutil.copy2(Path(folder) / name, local / name)
    return (local / "last.pt").exists()
