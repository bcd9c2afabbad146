"""A trial's training, in each of its Ray Train workers: `model.train.fit` with its reports going to Ray Train.

The only module of a trial that imports torch and the model: the trial's Tune actor and its Train
controller run tuning/sweep/trainable.py, which names this module's `train_worker` by name only
(`worker_entry.train_loop`), so torch is imported in the workers alone.

Each worker: the shared dataset from the object store -> fit(report=...) -> ray.train.report(metrics,
checkpoint) every epoch, rank 0's checkpoint going to Ray Train's storage under the trial's id. A restarted
worker (FailureConfig) or a resumed sweep continues from the latest one.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import ray
import ray.train
import torch

from model.atomic import write_text_atomic
from model.data import Dataset, dataset_from_bars
from model.train import fit
from model.training import resolve_device
from tuning.search.recipe import TrainingRecipe
from tuning.sweep.trial_files import HISTORY, save_best_snapshot, storage_filesystem

CHECKPOINT_FILES = ("last.pt", "best.pt", HISTORY)


def train_worker(config: dict[str, Any]) -> None:
    """Ray Train worker: fit() with its reports going to Ray Train, resuming from the latest checkpoint."""
    run = TrainingRecipe.from_dict(config["run"])
    hold_to_share(config.get("memory_fraction"), run.train.device)  # before anything is allocated on the GPU
    data = worker_dataset(config, run)
    rank = ray.train.get_context().get_world_rank()
    storage, trial_id = config.get("storage"), config.get("trial_id")
    if rank == 0 and config.get("relay") is not None:  # the run's placement group, for the relay to give back
        group = ray.util.get_current_placement_group()
        ray.get(config["relay"].placed.remote(trial_id, group.id.hex() if group else None))
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


def hold_to_share(fraction: float | None, device_setting: str) -> None:
    """A packed trial worker's CUDA allocator held to `fraction` of its GPU's memory (the memory probe's budget for
    it, tuning/sweep/memory_probe.py memory_fraction): a worker that outgrows its share fails alone, out of memory,
    instead of taking the memory the probe measured as its neighbours'. Nothing where it is not packed (None) or
    does not train on CUDA (train.device, as fit resolves it)."""
    if fraction is None:
        return
    device = resolve_device(device_setting)
    if device.type == "cuda":  # torch takes an index here ("cuda" alone is refused) and a float
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_per_process_memory_fraction(float(fraction), index)


def worker_dataset(config: dict[str, Any], run: TrainingRecipe) -> Dataset:
    """The trial's Dataset: the sweep's shared one (zero-copy views of the object store's arrays), or, when the
    space searches data settings, built here from the sweep's bars with this trial's (the same fold rules)."""
    if config.get("bars") is None:
        return ray.get(config["dataset"])
    shared = ray.get(config["dataset"])
    return dataset_from_bars(ray.get(config["bars"]), run.data, shared.summary["path"])


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
