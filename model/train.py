"""The training loop every trial and the production run use: AdamW, warmup + cosine, E0.

fit() knows nothing of Ray, MLflow or the terminal: it calls `report(metrics, checkpoint)`
once per epoch (epoch 0 is the evaluation before any step) and `progress(epoch, done,
total)` after each batch; callers pass their own. Its steps, and the state they share, are
model/training.py's `Training`; the settings are model/train_config.py's `TrainConfig`.
"""

from __future__ import annotations

from pathlib import Path

from model.config import ModelConfig
from model.data import Dataset
from model.train_config import TrainConfig
from model.training import FitResult, Progress, Report, ResumeMismatch, Training

__all__ = ["FitResult", "ResumeMismatch", "TrainConfig", "fit"]


def fit(
    train_config: TrainConfig,
    model_config: ModelConfig,
    data: Dataset,
    report: Report | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    stop_epoch: int | None = None,
    schedule_samples: int | None = None,
) -> FitResult:
    """Train a Forecaster on `data`; with checkpoint_dir, keep last.pt and best.pt there.

    Stops at the first non-finite loss or gradient (status "nan", nothing kept from that
    epoch); with resume, continues from checkpoint_dir/last.pt when there is one.
    stop_epoch: the last epoch trained (None: train_config.epochs), the warmup + cosine still
    spanning all train_config.epochs (a sweep winner's schedule, stopped at its best epoch);
    schedule_samples: training samples an epoch of that schedule counts (None: the data's own;
    a refit passes its trial's, so its learning rate at each epoch's end is the trial's).
    """
    last_epoch = train_config.epochs if stop_epoch is None else stop_epoch
    if not 1 <= last_epoch <= train_config.epochs:
        raise ValueError(f"stop_epoch must be in 1..{train_config.epochs} (the schedule's epochs), got {stop_epoch!r}")
    # -- set up: the model, optimizer and schedule, all seeded ------------------------------
    run = Training.start(train_config, model_config, data, checkpoint_dir, schedule_samples)
    # -- resume: every piece of state from last.pt --------------------------------------------
    if resume and run.can_restore():
        run.restore()
    # -- epoch 0: the model as initialised, evaluated before any step -------------------------
    if not run.history and not run.record(run.evaluate_e0(), report):
        return run.result("nan", 0)
    # -- training epochs: train, evaluate, record ------------------------------------------------
    for epoch in range(run.epoch + 1, last_epoch + 1):
        metrics = run.train_epoch(epoch, progress)
        if metrics is None or not run.record(metrics, report):
            return run.result("nan", epoch)
    return run.result("completed", last_epoch)
