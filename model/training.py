"""One training run's live state and its steps: set up, restore, evaluate E0, train an epoch, record.

`Training` holds the model, its optimizer and schedule, and what the run has recorded (its
history, best epoch, last epoch). model/train.py's `fit` calls its steps in order; nothing
here knows of Ray, MLflow or the terminal: an epoch's record goes to the `report` callback.

Data parallel: when torch.distributed is initialised with several processes, each process
takes every world-th sample of each batch, the model is wrapped in DistributedDataParallel
and the losses are summed over processes: the same gradient and metrics as one process
running the whole batch (a last batch with fewer samples than processes is skipped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import resource
import time
from collections.abc import Callable, Iterable
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
from model.objectives import DEFAULT_OBJECTIVE, per_sample_loss
from model.precision import autocast
from model.schedule import lr_factor
from model.train_config import TrainConfig

Report = Callable[[dict[str, Any], Path | None], None]
IDENTITY_KEYS = ("n_bars", "split_bar", "n_train", "n_val", "target", "horizon", "window", "vol_lookbacks",
                 "residual_to", "har", "leverage_lookbacks", "timezone",
                 "features", "objective")  # data_identity's, with the scaler; features: the inputs' names
# (model/checkpoint.py); objective: the loss the run is trained and validated by (an identity without it: the target's
# default, the only loss there was)
Progress = Callable[[int, int, int], None]


class ResumeMismatch(CheckpointError):
    """The checkpoint in --out belongs to another configuration or other data."""


@dataclass
class FitResult:
    status: str  # "completed" | "nan"
    stop_epoch: int
    best_val_loss: float
    best_epoch: int
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Training:
    """A run in progress. Build it with `Training.start`; `epoch` is the last epoch recorded (-1: none)."""

    config: TrainConfig
    model_config: ModelConfig  # n_features and n_targets set from the data
    data: Dataset
    device: torch.device
    model: Forecaster  # what is saved
    net: nn.Module  # what steps run: the model, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    rank: int
    world: int
    micro_batch: int  # samples per forward/backward; gradients accumulate over a batch's parts
    eval_batch: int
    checkpoint_dir: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    best_val_loss: float = math.inf
    best_epoch: int = 0
    epoch: int = -1

    @classmethod
    def start(cls, config: TrainConfig, model_config: ModelConfig, data: Dataset,
              checkpoint_dir: str | Path | None, schedule_samples: int | None = None) -> Training:
        """The model (seeded), its AdamW and warmup + cosine schedule, on the configured device.

        The schedule spans config.epochs epochs of `schedule_samples` training samples each (None: the data's
        own); a run with more samples an epoch (a refit) maps its steps onto it, so that the learning rate at
        the end of each epoch is the one the run on `schedule_samples` samples had there.
        """
        device = resolve_device(config.device)
        model_config = dataclasses.replace(model_config, n_features=data.n_features, n_targets=1,  # set by the data
                                           residual=data.residual)
        if config.threads is not None:
            torch.set_num_threads(config.threads)  # the process's setting: a run owns its process
        torch.manual_seed(config.seed)
        model = Forecaster(model_config).to(device)
        rank, world = _rank_and_world()
        net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
        optimizer = torch.optim.AdamW(
            weight_decay_groups(model, config.weight_decay), lr=config.lr, betas=config.betas, eps=config.eps,
            **({"fused": True} if device.type == "cuda" else {"foreach": True}),
        )
        if config.batch_size < world:
            raise ValueError(f"batch_size {config.batch_size} is smaller than the {world} workers sharing each "
                             "batch; raise batch_size or use fewer workers")
        steps = steps_per_epoch(len(data.train_index), config.batch_size, world)
        scheduled = steps_per_epoch(schedule_samples or len(data.train_index), config.batch_size, world)
        total_steps = scheduled * config.epochs
        warmup = round(config.warmup_fraction * total_steps)
        scheduler = torch.optim.lr_scheduler.LambdaLR(  # step * scheduled / steps: exact at every epoch's end
            optimizer, lambda step: lr_factor(step * scheduled / steps, total_steps, warmup, config.min_lr_fraction))
        # On CPU a batch of 512 windows runs 3x slower per sample than 64 at a time (cache-bound
        # intermediates), so batches are split and gradients accumulated: the same gradient.
        micro = config.micro_batch_size or (config.batch_size if device.type == "cuda" else 64)
        return cls(config, model_config, data, device, model, net, optimizer, scheduler, rank, world, micro,
                   eval_batch_size(config, device), None if checkpoint_dir is None else Path(checkpoint_dir))

    # -- resume -------------------------------------------------------------------------------
    def restore(self) -> None:
        """Every piece of state from last.pt; ResumeMismatch when it was made with other settings or data."""
        path = self.checkpoint_dir / "last.pt"
        saved = load_checkpoint(path, map_location=self.device)
        for what, mine, theirs in (("model configuration", self.model_config.to_dict(),  # defaults for newer keys
                                    ModelConfig.from_saved(saved["model_config"]).to_dict()),
                                   ("training configuration", self.config.to_dict(),
                                    TrainConfig.from_dict(saved["train_config"]).to_dict()),
                                   ("data", *_identities(self.data, saved["data"]))):
            if mine != theirs:
                raise ResumeMismatch(f"{path} was trained with other {what}; resume with the same data and "
                                     "settings, or train into a new --out")
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        self.history, self.epoch = saved["history"], saved["epoch"]
        self.best_val_loss, self.best_epoch = saved["best_val_loss"], saved["best_epoch"]

    def can_restore(self) -> bool:
        return self.checkpoint_dir is not None and (self.checkpoint_dir / "last.pt").exists()

    # -- epoch 0 and training epochs ------------------------------------------------------------
    def evaluate_e0(self) -> dict[str, Any]:
        """Epoch 0: the model as initialised, evaluated before any step.

        Its train loss is the epochs' quantity (the mean loss over the training samples, each under
        the weights it met) with no step taken, so a fixed sample of the training segment estimates
        it: at most as many samples as the validation segment (e0_train_sample), not a whole pass.
        """
        start = time.perf_counter()
        train_loss = self._evaluate(e0_train_sample(self.data.train_index, len(self.data.val_index)))
        val_loss = self._evaluate(self.data.val_index)
        return epoch_metrics(0, train_loss, val_loss, self.scheduler.get_last_lr()[0], 0,
                             time.perf_counter() - start, self.device, self.data)

    def train_epoch(self, epoch: int, progress: Progress | None) -> dict[str, Any] | None:
        """One pass over the training samples in a seeded order, then the validation loss.

        Returns the epoch's metrics, or None at the first non-finite batch loss or gradient
        (checked before the optimizer step: no NaN is ever applied).
        """
        self.net.train()
        start, seen, loss_sum = time.perf_counter(), 0, 0.0
        order = torch.randperm(len(self.data.train_index), generator=torch.Generator().manual_seed(
            self.config.seed * 1_000_003 + epoch))  # a pure function of (seed, epoch): resumable
        batches = torch.as_tensor(self.data.train_index)[order].split(self.config.batch_size)
        if self.world > 1:  # a last batch smaller than the world would leave a process without samples
            batches = [b for b in batches if len(b) >= self.world]
        for done, index in enumerate(batches, start=1):
            batch_loss = self._step(index)
            if batch_loss is None:
                return None
            seen += len(index)
            loss_sum += batch_loss * len(index)
            if progress is not None:
                progress(epoch, done, len(batches))
        train_seconds = time.perf_counter() - start
        val_loss = self._evaluate(self.data.val_index)
        return epoch_metrics(epoch, loss_sum / seen, val_loss, self.scheduler.get_last_lr()[0], seen / train_seconds,
                             time.perf_counter() - start, self.device, self.data)

    def _step(self, index: torch.Tensor) -> float | None:
        """One optimizer step on the batch of samples ending at bars `index` (n,); its mean loss, or None
        when the loss or the gradient is non-finite (the step is then not taken)."""
        self.optimizer.zero_grad(set_to_none=True)
        batch_loss = torch.zeros((), device=self.device)
        mine = index[self.rank::self.world]  # this process's share; DDP averages gradients over the world
        parts = mine.split(self.micro_batch)
        objective, scale = self.data.objective, self.data.objective_scale
        for i, part in enumerate(parts):  # the batch's mean loss (the objective's), accumulated part by part
            inputs, targets = (t.to(self.device) for t in self.data.batch(part))
            sync = self.world == 1 or i == len(parts) - 1  # DDP all-reduces once, on the last part
            with contextlib.nullcontext() if sync else self.net.no_sync():
                with autocast(self.config.precision, self.device):
                    loss = per_sample_loss(objective, self.net(inputs), targets, scale).sum() / len(index)
                (loss * self.world).backward()
            batch_loss += loss.detach()
        if self.world > 1:
            dist.all_reduce(batch_loss)  # every process's share summed: the whole batch's loss
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip or math.inf)
        batch_loss, grad_norm = torch.stack([batch_loss, grad_norm.to(self.device)]).tolist()  # one host sync
        if not (math.isfinite(batch_loss) and math.isfinite(grad_norm)):
            return None
        self.optimizer.step()
        self.scheduler.step()
        return batch_loss

    def _evaluate(self, index: np.ndarray) -> float:
        return evaluate(self.model, self.data, index, self.eval_batch, self.device, self.rank, self.world,
                        self.config.precision)

    # -- record ----------------------------------------------------------------------------------
    def record(self, metrics: dict[str, Any], report: Report | None) -> bool:
        """Keep an epoch's metrics (with the best so far and E0), save checkpoints, report them.

        False, keeping nothing, when the epoch's losses are non-finite.
        """
        epoch = metrics["epoch"]
        if not (math.isfinite(metrics["val_loss"]) and math.isfinite(metrics["train_loss"])):
            return False
        if metrics["val_loss"] < self.best_val_loss:
            self.best_val_loss, self.best_epoch = metrics["val_loss"], epoch
        metrics.update(best_val_loss=self.best_val_loss, best_epoch=self.best_epoch)
        e0 = self.history[0]["val_loss"] if self.history else metrics["val_loss"]
        metrics["e0_val_loss"] = e0
        metrics["improvement_over_e0"] = 1 - metrics["val_loss"] / e0 if e0 > 0 else 0.0
        self.history.append(metrics)
        self.epoch = epoch
        checkpoint = None
        if self.checkpoint_dir is not None:
            if self.best_epoch == epoch:  # best first: last.pt never names a best epoch not on disk
                self._save("best.pt", epoch)
            checkpoint = self._save("last.pt", epoch)
        if report is not None:
            report(metrics, checkpoint)
        return True

    def _save(self, name: str, epoch: int) -> Path:
        path = self.checkpoint_dir / name
        save_atomic({
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "epoch": epoch, "model_config": self.model_config.to_dict(),
            "train_config": self.config.to_dict(), "scaler": self.data.scaler.to_dict(),
            "data": data_identity(self.data), "history": self.history,
            "best_val_loss": self.best_val_loss, "best_epoch": self.best_epoch,
        }, path)
        return path

    def result(self, status: str, stop_epoch: int) -> FitResult:
        return FitResult(status, stop_epoch, self.best_val_loss, self.best_epoch, self.history)


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes (0, 1 without torch.distributed)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def steps_per_epoch(n_train: int, batch_size: int, world: int) -> int:
    """Optimizer steps an epoch runs: whole batches, and a last smaller one unless it has fewer samples than
    processes (it is then skipped)."""
    full, rest = divmod(n_train, batch_size)
    return full + (rest >= world if rest else 0)


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


def eval_batch_size(config: TrainConfig, device: torch.device) -> int:
    """Samples per evaluation batch: the configured one, else 1024 on GPU and 64 on CPU."""
    return config.eval_batch_size or (1024 if device.type == "cuda" else 64)


def data_identity(data: Dataset, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """What makes two datasets the same for resuming: the bars, the sampling, the inputs, the scaling.

    keys: only these (those an identity saved by an earlier version has: it predates the newer ones).
    """
    identity = {**{k: data.summary[k] for k in IDENTITY_KEYS}, "scaler": data.scaler.to_dict()}
    return identity if keys is None else {k: identity[k] for k in keys if k in identity}


def _identities(data: Dataset, saved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data's identity and a checkpoint's saved one, to compare: only the keys the saved one has, and the
    objective (a saved identity made before objectives has none: its target's default)."""
    if "objective" not in saved and "target" in saved:
        saved = {**saved, "objective": DEFAULT_OBJECTIVE[saved["target"]]}
    return data_identity(data, keys=saved), saved


def e0_train_sample(train_index: np.ndarray, n: int) -> np.ndarray:
    """At most `n` of the training samples `train_index` (n_train,), evenly spaced from its first to its last
    -> (min(n, n_train),): the same for every trial of the same data."""
    if len(train_index) <= n:
        return train_index
    return train_index[np.linspace(0, len(train_index) - 1, n).round().astype(np.int64)]


@torch.inference_mode()
def evaluate(model: nn.Module, data: Dataset, index: np.ndarray, batch_size: int, device: torch.device,
             rank: int = 0, world: int = 1, precision: str = "fp32") -> float:
    """The mean loss, by the data's objective (model/objectives.py; mse_log: the mean squared error in scaled target
    units), over the samples ending at bars `index` (n,).

    With world > 1 each process evaluates every world-th sample and the sums are all-reduced;
    `precision` as in training (the forward pass under its autocast, the error in float32).
    """
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of losses, count)
    objective, scale = data.objective, data.objective_scale
    for part in torch.as_tensor(index)[rank::world].split(batch_size):
        inputs, targets = (t.to(device) for t in data.batch(part))  # (n, window, n_features), (n, 1)
        with autocast(precision, device):
            predictions = model(inputs)  # (n, 1)
        total[0] += per_sample_loss(objective, predictions.float(), targets, scale).sum().double()
        total[1] += len(part)
    if world > 1:
        dist.all_reduce(total)
    losses, count = total.tolist()
    return losses / count


@torch.inference_mode()
def predict(model: nn.Module, data: Dataset, index: np.ndarray, batch_size: int, device: torch.device,
            precision: str = "fp32") -> np.ndarray:
    """(n,) float64 forecasts, in scaled target units, of the samples ending at bars `index` (n,)."""
    model.eval()
    parts = []
    for part in torch.as_tensor(index).split(batch_size):
        inputs, _ = data.batch(part)  # (n, window, n_features)
        with autocast(precision, device):
            parts.append(model(inputs.to(device))[:, 0].double().cpu())  # (n,)
    return torch.cat(parts).numpy() if parts else np.empty(0)


def epoch_metrics(epoch: int, train_loss: float, val_loss: float, lr: float, samples_per_s: float, epoch_s: float,
                  device: torch.device, data: Dataset) -> dict[str, Any]:
    """One epoch's record. train_loss: the mean over the epoch's batches, each before its step (E0: the model
    as initialised on e0_train_sample);
    lr: the learning rate at the end of the epoch; peak_memory_mb: the process's peak so far."""
    return {
        "epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, "lr": lr,
        "overfit_ratio": val_loss / train_loss if train_loss > 0 else math.inf,
        "samples_per_s": samples_per_s, "epoch_s": epoch_s, "peak_memory_mb": _peak_memory_mb(device),
        **data.baseline_metrics(),
    }


def _peak_memory_mb(device: torch.device) -> float:
    """CUDA: max allocated on the device; CPU: the process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
