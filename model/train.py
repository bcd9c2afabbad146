"""The training loop every trial and the production run use: AdamW, warmup + cosine, E0.

fit() knows nothing of Ray, MLflow or the terminal: it calls `report(metrics, checkpoint)`
once per epoch (epoch 0 is the evaluation before any step) and `progress(epoch, done,
total)` after each batch; callers pass their own.

Data parallel: when torch.distributed is initialised with several processes (Ray Train's
workers), each process takes every world-th sample of each batch, the model is wrapped in
DistributedDataParallel and the losses are summed over processes: the same gradient and
metrics as one process running the whole batch (a last batch with fewer samples than
processes is skipped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from model.checkpoint import CheckpointError, load_checkpoint, save_atomic
from model.config import ModelConfig
from model.data import Dataset
from model.forecaster import Forecaster
from model.norm import GatedRMSNorm
from model.precision import PRECISIONS, autocast
from model.schedule import lr_factor
from model.settings import known_settings, plain_values, require_positive_ints

Report = Callable[[dict[str, Any], Path | None], None]
Progress = Callable[[int, int, int], None]
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; defaults are the original system's (lr 5e-5, wd 1e-4, batch 512)."""

    epochs: int = 50
    batch_size: int = 512
    lr: float = 5e-5  # peak learning rate, reached at the end of warmup
    weight_decay: float = 1e-4  # decoupled (AdamW), on weights only
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_fraction: float = 0.05  # of all optimizer steps, linear from lr/warmup to lr
    min_lr_fraction: float = 0.1  # the cosine ends at lr * this
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    seed: int = 0
    device: str = "auto"  # "auto" (cuda when available) | "cpu" | "cuda"
    precision: str = "fp32"  # "fp32" | "bf16": bf16 autocast, float32 parameters and SSM state (model/precision.py)
    micro_batch_size: int | None = None  # split each batch, accumulating gradients; None: 64 on CPU, whole on GPU
    eval_batch_size: int | None = None  # None: 64 on CPU, 1024 on GPU

    def __post_init__(self) -> None:
        require_positive_ints(self, ("epochs", "batch_size", "micro_batch_size", "eval_batch_size"),
                              optional=("micro_batch_size", "eval_batch_size"))
        if not _number(self.lr) or not 0 < self.lr < 1:  # `not (a < x)` form: NaN fails every check
            raise ValueError(f"lr must be in (0, 1), got {self.lr!r}")
        if not _number(self.weight_decay) or not 0 <= self.weight_decay < 1:
            raise ValueError(f"weight_decay must be in [0, 1), got {self.weight_decay!r}")
        if len(self.betas) != 2 or not all(_number(b) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if not _number(self.warmup_fraction) or not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        if not _number(self.min_lr_fraction) or not 0 <= self.min_lr_fraction <= 1:
            raise ValueError(f"min_lr_fraction must be in [0, 1], got {self.min_lr_fraction!r}")
        if not _number(self.eps) or not self.eps > 0:
            raise ValueError(f"eps must be a positive number, got {self.eps!r}")
        if not _number(self.grad_clip) or not self.grad_clip >= 0:
            raise ValueError(f"grad_clip must be a number >= 0 (0 disables clipping), got {self.grad_clip!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        values = known_settings(cls, values, "train")
        return cls(**{k: tuple(v) if k == "betas" else v for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        return plain_values(self)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class ResumeMismatch(CheckpointError):
    """The checkpoint in --out belongs to another configuration or other data."""


@dataclass
class FitResult:
    status: str  # "completed" | "nan"
    stop_epoch: int
    best_val_loss: float
    best_epoch: int
    history: list[dict[str, Any]] = field(default_factory=list)


def weight_decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW groups: decay on weights; none on biases, norm weights and `_no_weight_decay`."""
    decay, no_decay = [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            exempt = (getattr(param, "_no_weight_decay", False) or name.endswith("bias")
                      or isinstance(module, (nn.RMSNorm, GatedRMSNorm, nn.LayerNorm)))
            (no_decay if exempt else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is available; use --device cpu or auto")
    return torch.device(name)


def fit(
    train_config: TrainConfig,
    model_config: ModelConfig,
    data: Dataset,
    report: Report | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    progress: Progress | None = None,
) -> FitResult:
    """Train a Forecaster on `data`; with checkpoint_dir, keep last.pt and best.pt there."""
    # -- setup: model, optimizer, schedule, all seeded -----------------------------------
    device = resolve_device(train_config.device)
    model_config = dataclasses.replace(model_config, n_features=data.n_features, n_targets=1)  # set by the data
    torch.manual_seed(train_config.seed)
    model = Forecaster(model_config).to(device)
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else (0, 1)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model  # what steps run; `model` is saved
    optimizer = torch.optim.AdamW(
        weight_decay_groups(model, train_config.weight_decay), lr=train_config.lr, betas=train_config.betas,
        eps=train_config.eps, **({"fused": True} if device.type == "cuda" else {"foreach": True}),
    )
    if train_config.batch_size < world:
        raise ValueError(f"batch_size {train_config.batch_size} is smaller than the {world} workers sharing each "
                         "batch; raise batch_size or use fewer workers")
    full, rest = divmod(len(data.train_index), train_config.batch_size)
    steps_per_epoch = full + (rest >= world if rest else 0)  # a last batch smaller than the world is skipped
    total_steps = steps_per_epoch * train_config.epochs
    warmup = round(train_config.warmup_fraction * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, total_steps, warmup, train_config.min_lr_fraction))
    # On CPU a batch of 512 windows runs 3x slower per sample than 64 at a time (cache-bound
    # intermediates), so batches are split and gradients accumulated: the same gradient.
    micro = train_config.micro_batch_size or (train_config.batch_size if device.type == "cuda" else 64)
    eval_batch = eval_batch_size(train_config, device)
    precision = train_config.precision
    ckpt_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
    state = {"history": [], "best_val_loss": math.inf, "best_epoch": 0, "epoch": -1}

    def save(name: str, epoch: int) -> Path:
        path = ckpt_dir / name
        save_atomic({
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "epoch": epoch, "model_config": model_config.to_dict(), "train_config": train_config.to_dict(),
            "scaler": data.scaler.to_dict(), "data": data_identity(data), "history": state["history"],
            "best_val_loss": state["best_val_loss"], "best_epoch": state["best_epoch"],
        }, path)
        return path

    # -- resume: every piece of state from last.pt ------------------------------------------
    if resume and ckpt_dir is not None and (ckpt_dir / "last.pt").exists():
        saved = load_checkpoint(ckpt_dir / "last.pt", map_location=device)
        for what, mine, theirs in (("model configuration", model_config.to_dict(), saved["model_config"]),
                                   ("training configuration", train_config.to_dict(),  # defaults for newer keys
                                    TrainConfig.from_dict(saved["train_config"]).to_dict()),
                                   ("data", data_identity(data), saved["data"])):
            if mine != theirs:
                raise ResumeMismatch(f"{ckpt_dir / 'last.pt'} was trained with other {what}; resume with the same "
                                     "data and settings, or train into a new --out")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        state.update(history=saved["history"], best_val_loss=saved["best_val_loss"],
                     best_epoch=saved["best_epoch"], epoch=saved["epoch"])

    def finish(status: str, epoch: int) -> FitResult:
        return FitResult(status, epoch, state["best_val_loss"], state["best_epoch"], state["history"])

    def record(metrics: dict[str, Any]) -> bool:
        """Log an epoch's metrics; save checkpoints; False when the run has gone non-finite."""
        epoch = metrics["epoch"]
        if not (math.isfinite(metrics["val_loss"]) and math.isfinite(metrics["train_loss"])):
            return False
        if metrics["val_loss"] < state["best_val_loss"]:
            state["best_val_loss"], state["best_epoch"] = metrics["val_loss"], epoch
        metrics.update(best_val_loss=state["best_val_loss"], best_epoch=state["best_epoch"])
        e0 = state["history"][0]["val_loss"] if state["history"] else metrics["val_loss"]
        metrics["e0_val_loss"] = e0
        metrics["improvement_over_e0"] = 1 - metrics["val_loss"] / e0 if e0 > 0 else 0.0
        state["history"].append(metrics)
        state["epoch"] = epoch
        checkpoint = None
        if ckpt_dir is not None:
            if state["best_epoch"] == epoch:  # best first: last.pt never names a best epoch not on disk
                save("best.pt", epoch)
            checkpoint = save("last.pt", epoch)
        if report is not None:
            report(metrics, checkpoint)
        return True

    # -- epoch 0: the model as initialised, evaluated before any step ------------------------
    if not state["history"]:
        start = time.perf_counter()
        e0 = _metrics(0, evaluate(model, data, data.train_index, eval_batch, device, rank, world, precision),
                      evaluate(model, data, data.val_index, eval_batch, device, rank, world, precision),
                      scheduler.get_last_lr()[0], 0, time.perf_counter() - start, device, data)
        if not record(e0):
            return finish("nan", 0)

    # -- training epochs ---------------------------------------------------------------------
    for epoch in range(state["epoch"] + 1, train_config.epochs + 1):
        net.train()
        start, seen, loss_sum = time.perf_counter(), 0, 0.0
        order = torch.randperm(len(data.train_index), generator=torch.Generator().manual_seed(
            train_config.seed * 1_000_003 + epoch))  # a pure function of (seed, epoch): resumable
        batches = torch.as_tensor(data.train_index)[order].split(train_config.batch_size)
        if world > 1:  # a last batch smaller than the world would leave a process without samples
            batches = [b for b in batches if len(b) >= world]
        for done, index in enumerate(batches, start=1):
            optimizer.zero_grad(set_to_none=True)
            batch_loss = torch.zeros((), device=device)
            mine = index[rank::world]  # this process's share; DDP averages gradients over the world
            parts = mine.split(micro)
            for i, part in enumerate(parts):  # the batch's mean squared error, accumulated part by part
                inputs, targets = (t.to(device) for t in data.batch(part))
                sync = world == 1 or i == len(parts) - 1  # DDP all-reduces once, on the last part
                with contextlib.nullcontext() if sync else net.no_sync():
                    with autocast(train_config.precision, device):
                        loss = nn.functional.mse_loss(net(inputs), targets, reduction="sum") / len(index)
                    (loss * world).backward()
                batch_loss += loss.detach()
            if world > 1:
                dist.all_reduce(batch_loss)  # every process's share summed: the whole batch's loss
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), train_config.grad_clip or math.inf)
            batch_loss, grad_norm = torch.stack([batch_loss, grad_norm.to(device)]).tolist()  # one host sync a step
            if not (math.isfinite(batch_loss) and math.isfinite(grad_norm)):  # before the step: no NaN is applied
                return finish("nan", epoch)
            optimizer.step()
            scheduler.step()
            seen += len(index)
            loss_sum += batch_loss * len(index)
            if progress is not None:
                progress(epoch, done, len(batches))
        train_seconds = time.perf_counter() - start
        val_loss = evaluate(model, data, data.val_index, eval_batch, device, rank, world, precision)
        metrics = _metrics(epoch, loss_sum / seen, val_loss, scheduler.get_last_lr()[0], seen / train_seconds,
                           time.perf_counter() - start, device, data)
        if not record(metrics):
            return finish("nan", epoch)
    return finish("completed", train_config.epochs)


def eval_batch_size(config: TrainConfig, device: torch.device) -> int:
    """Samples per evaluation batch: the configured one, else 1024 on GPU and 64 on CPU."""
    return config.eval_batch_size or (1024 if device.type == "cuda" else 64)


def data_identity(data: Dataset) -> dict[str, Any]:
    """What makes two datasets the same for resuming: the bars, the sampling, the scaling."""
    keys = ("n_bars", "split_bar", "n_train", "n_val", "target", "horizon", "window")
    return {**{k: data.summary[k] for k in keys}, "scaler": data.scaler.to_dict()}


@torch.inference_mode()
def evaluate(model: nn.Module, data: Dataset, index: np.ndarray, batch_size: int, device: torch.device,
             rank: int = 0, world: int = 1, precision: str = "fp32") -> float:
    """Mean squared error over the samples ending at bars `index` (scaled target units).

    With world > 1 each process evaluates every world-th sample and the sums are all-reduced;
    `precision` as in training (the forward pass under its autocast, the error in float32).
    """
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of squared errors, count)
    for part in torch.as_tensor(index)[rank::world].split(batch_size):
        inputs, targets = (t.to(device) for t in data.batch(part))
        with autocast(precision, device):
            predictions = model(inputs)  # (n, 1)
        total[0] += nn.functional.mse_loss(predictions.float(), targets, reduction="sum").double()
        total[1] += len(part)
    if world > 1:
        dist.all_reduce(total)
    squared, count = total.tolist()
    return squared / count


def _metrics(epoch: int, train_loss: float, val_loss: float, lr: float, samples_per_s: float, epoch_s: float,
             device: torch.device, data: Dataset) -> dict[str, Any]:
    """One epoch's record. train_loss: the mean over the epoch's batches (E0: a full evaluation);
    lr: the learning rate at the end of the epoch; peak_memory_mb: the process's peak so far."""
    return {
        "epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, "lr": lr,
        "overfit_ratio": val_loss / train_loss if train_loss > 0 else math.inf,
        "samples_per_s": samples_per_s, "epoch_s": epoch_s, "peak_memory_mb": _peak_memory_mb(device),
        "baseline_mean": data.baselines["mean"], "baseline_persistence": data.baselines["persistence"],
    }


def _peak_memory_mb(device: torch.device) -> float:
    """CUDA: max allocated on the device; CPU: the process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
