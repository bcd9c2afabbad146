"""TrainConfig: the optimisation settings of one training run, frozen and validated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.settings import Interval, finite_number, known_settings, plain_values, require_positive_ints

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "bf16")  # how each runs: model/precision.py
# The rule of each bounded setting: TrainConfig checks them, and a search space's ranges are checked against them.
BOUNDS = {"lr": Interval(0, 1, low_closed=False), "weight_decay": Interval(0, 1),
          "warmup_fraction": Interval(0, 1), "min_lr_fraction": Interval(0, 1, high_closed=True)}


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; defaults are the original system's (lr 5e-5, wd 1e-4, batch 512)."""

    epochs: int = 50  # passes over the training samples
    batch_size: int = 512  # samples per optimizer step
    lr: float = 5e-5  # peak learning rate, reached at the end of warmup
    weight_decay: float = 1e-4  # decoupled (AdamW), on weights only
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW's decay rates of its gradient moments
    eps: float = 1e-8  # AdamW's term added to the denominator, for numerical stability
    warmup_fraction: float = 0.05  # of all optimizer steps, linear from lr/warmup to lr
    min_lr_fraction: float = 0.1  # the cosine ends at lr * this
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    seed: int = 0  # seeds the model's initialisation and the batches' order
    device: str = "auto"  # "auto" (cuda when available) | "cpu" | "cuda"
    precision: str = "fp32"  # "fp32" | "bf16": bf16 autocast, float32 parameters and SSM state (model/precision.py)
    micro_batch_size: int | None = None  # split each batch, accumulating gradients; None: 64 on CPU, whole on GPU
    eval_batch_size: int | None = None  # None: 64 on CPU, 1024 on GPU
    # torch's CPU threads for the run (torch.set_num_threads); None: torch's default (OMP_NUM_THREADS, else every
    # core). Another thread count sums in another order: the same run drifts away from its curve.
    threads: int | None = None

    def __post_init__(self) -> None:
        require_positive_ints(self, ("epochs", "batch_size", "micro_batch_size", "eval_batch_size", "threads"),
                              optional=("micro_batch_size", "eval_batch_size", "threads"))
        for name, rule in BOUNDS.items():
            if getattr(self, name) not in rule:  # NaN and non-numbers are never inside
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)!r}")
        if len(self.betas) != 2 or not all(b in Interval(0, 1) for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if not finite_number(self.eps) or not self.eps > 0:
            raise ValueError(f"eps must be a positive number, got {self.eps!r}")
        if not finite_number(self.grad_clip) or not self.grad_clip >= 0:
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

