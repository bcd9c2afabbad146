"""Which Mamba-2 implementation runs: mamba_ssm's fused CUDA kernels, or the pure-torch path.

mamba_ssm needs CUDA and Triton; on CPU machines importing it raises ImportError or
RuntimeError (or worse), so every import here is guarded by `except Exception`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from model.errors import InputError

FusedScan = Callable[..., torch.Tensor]


class BackendUnavailable(InputError, RuntimeError):
    """A forced backend that cannot run here."""


@functools.lru_cache(maxsize=1)
def load_fused_kernel() -> tuple[FusedScan | None, str]:
    """mamba_ssm's fused conv1d + SSD + gated-norm + out_proj kernel, or (None, why not)."""
    try:
        import causal_conv1d  # noqa: F401  (the fused path calls its CUDA conv)
        from mamba_ssm.ops.triton.ssd_combined import mamba_split_conv1d_scan_combined
    except Exception as exc:  # ImportError on CPU wheels, RuntimeError without a driver, ...
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    return mamba_split_conv1d_scan_combined, ""


def check_backend(backend: str) -> None:
    """At construction: a forced "mamba_ssm" backend must be importable."""
    if backend == "mamba_ssm":
        kernel, why = load_fused_kernel()
        if kernel is None:
            raise BackendUnavailable(
                f"backend 'mamba_ssm' cannot run: importing mamba_ssm and causal_conv1d failed ({why}); "
                "install the 'cuda' extra on a CUDA machine, or use backend='auto' or 'torch'"
            )


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend a forward pass on `device` uses: "mamba_ssm" or "torch"."""
    if backend == "torch":
        return "torch"
    on_cuda = device.type == "cuda"
    if backend == "mamba_ssm":
        check_backend(backend)
        if not on_cuda:
            raise BackendUnavailable(
                f"backend 'mamba_ssm' needs the module on a CUDA device, it is on {device.type}; "
                "move it with .to('cuda') or use backend='auto' or 'torch'"
            )
        return "mamba_ssm"
    return "mamba_ssm" if on_cuda and load_fused_kernel()[0] is not None else "torch"
