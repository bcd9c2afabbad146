"""Which Mamba-2 implementation runs: mamba_ssm's fused CUDA kernels, or the pure-torch path.

The kernels' import is tried once per process (cached) and what failed is kept, word for word:
`import mamba_ssm` needs its compiled `selective_scan_cuda`, and the fused path calls
causal_conv1d's compiled `causal_conv1d_cuda`; on CPU machines they raise ImportError or
RuntimeError (or worse), so every import here is guarded by `except Exception`.

`auto` takes the kernels on a CUDA device and the torch path elsewhere; on a CUDA device whose
kernels do not import it stops (BackendUnavailable), never falling back to the slower path
unasked: model.backend=torch chooses that path knowingly.

Importing this module imports no torch (tuning/cluster/gpu_ready.py reads KERNELS_FIX on
machines whose sweep driver stays light).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model.errors import InputError

if TYPE_CHECKING:
    import torch

# mamba_split_conv1d_scan_combined: zxbcdt (batch, seqlen, d_in_proj) -> (batch, seqlen, d_model)
FusedScan = Callable[..., Any]

# How to install the kernels: every message about kernels that do not load ends with it.
KERNELS_FIX = ("install them: `make` on a machine with an NVIDIA GPU installs the release wheels "
               "(docs/gpus.md, \"Installing the kernels\")")
# The other choice every such message offers.
TORCH_PATH_FIX = "or set model.backend=torch to train on the slower torch path knowingly"
KERNEL_MODULES = ("mamba_ssm", "causal_conv1d")  # each imports its compiled CUDA extension


class BackendUnavailable(InputError, RuntimeError):
    """A backend that cannot run here: forced and unavailable, or `auto` on CUDA without the kernels."""


@functools.lru_cache(maxsize=1)
def load_fused_kernel() -> tuple[FusedScan | None, str]:
    """mamba_ssm's fused conv1d + SSD + gated-norm + out_proj kernel, or (None, what failed).

    What failed names each import that failed and its first line, e.g.
    "import mamba_ssm: ModuleNotFoundError: No module named 'selective_scan_cuda'; import causal_conv1d: ...".
    """
    failed = [f"import {name}: {why}" for name, why in ((name, _import_error(name)) for name in KERNEL_MODULES)
              if why]
    if failed:
        return None, "; ".join(failed)
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_split_conv1d_scan_combined
    except Exception as exc:  # a mamba_ssm that imports but lacks (or cannot build) the fused op
        return None, f"import mamba_ssm.ops.triton.ssd_combined: {first_line(exc)}"
    return mamba_split_conv1d_scan_combined, ""


def _import_error(module: str) -> str:
    """"" when `module` imports, else the first line of why not."""
    try:
        __import__(module)
    except Exception as exc:  # ImportError on CPU wheels, RuntimeError without a driver, OSError on a bad .so, ...
        return first_line(exc)
    return ""


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def kernels_missing_text(why: str) -> str:
    """The one sentence about kernels that do not load here: what failed, and how to install them."""
    return f"mamba-ssm's fused kernels do not load ({why}); {KERNELS_FIX}"


def check_backend(backend: str) -> None:
    """At construction: a forced "mamba_ssm" backend must be importable."""
    if backend == "mamba_ssm":
        kernel, why = load_fused_kernel()
        if kernel is None:
            raise BackendUnavailable(
                f"model.backend mamba_ssm cannot run here: {kernels_missing_text(why)}; "
                "or set model.backend=auto or torch"
            )


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend a forward pass on `device` uses: "mamba_ssm" or "torch".

    "torch" is always torch; "auto" is torch off CUDA, the kernels on CUDA (raising BackendUnavailable when they do
    not import: never a silent fall-back); "mamba_ssm" is the kernels, on CUDA only.
    """
    if backend == "torch":
        return "torch"
    on_cuda = device.type == "cuda"
    if backend == "mamba_ssm":
        check_backend(backend)
        if not on_cuda:
            raise BackendUnavailable(
                f"model.backend mamba_ssm needs the module on a CUDA device, it is on {device.type}; "
                "move it with .to('cuda') or set model.backend=auto or torch"
            )
        return "mamba_ssm"
    if not on_cuda:
        return "torch"
    kernel, why = load_fused_kernel()
    if kernel is None:
        raise BackendUnavailable(
            f"model.backend auto on {device}: {kernels_missing_text(why)}; {TORCH_PATH_FIX}"
        )
    return "mamba_ssm"
