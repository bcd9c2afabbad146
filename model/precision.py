"""Training precision: fp32, or bf16 autocast around float32 parameters, optimizer state and SSM state.

bf16: under torch.autocast, matmuls and convolutions run in bfloat16 and losses in float32;
parameters, gradients and AdamW's moments stay float32 (autocast never changes them); the SSD
scan and the state it carries turn autocast off and run in float32 (model/ssd.py), as
mamba_ssm's kernel keeps its state in float32. bf16 has float32's exponent range, so no loss
scaling. It pays on CUDA (tensor cores); on CPU it runs, usually slower than fp32.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import TypeVar

import torch

F = TypeVar("F", bound=Callable[..., torch.Tensor | tuple[torch.Tensor, ...]])


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context a training or evaluation forward pass runs in (`precision` as TrainConfig validated it)."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


def full_precision(device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast off: what runs inside keeps its inputs' dtypes (float32 for the SSM state)."""
    return torch.autocast(device.type, enabled=False)


def in_full_precision(scan: F) -> F:
    """Decorate a scan whose first argument `x` is a tensor: it runs with autocast off, on x's device."""

    @functools.wraps(scan)
    def run(*args, **kwargs):
        x = args[0] if args else kwargs["x"]
        with full_precision(x.device):
            return scan(*args, **kwargs)

    return run  # type: ignore[return-value]
