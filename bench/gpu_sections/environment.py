"""Section 1, the environment: what a GPU run depends on, each read where it is, nothing assumed.

Real on every machine: python, torch and the CUDA it was built for, Triton, the kernel packages'
imports (or their exact error) and the backend `auto` picks, the driver as nvidia-smi reports it, and
`warning`: the verdict `make`, `mamba-tune doctor`, `sweep` and `train` give on this machine's GPU
(tuning/cluster/gpu_ready.py, one line with its fix), where nvidia-smi answers and that GPU cannot train;
with CUDA also the device and its compute capability, and a Triton kernel launched.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import platform
import shutil
import sys
import time
from typing import Any

from bench.gpu_sections.context import NO_CUDA, SectionContext, first_line

NO_DRIVER = "none: no nvidia-smi, or it lists no GPU (no NVIDIA GPU here)"


def run(context: SectionContext) -> dict[str, Any]:
    import torch

    from model.backend import load_fused_kernel, resolve_backend
    from tuning.cluster.gpu_ready import driver_facts, gpu_problem, torch_facts

    cuda = torch.cuda.is_available()
    kernel, why = load_fused_kernel()
    driver = driver_facts()
    report = {
        "python": sys.version.split()[0], "platform": platform.platform(),
        "driver": NO_DRIVER if driver is None else dataclasses.asdict(driver),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": cuda,
        "device_count": torch.cuda.device_count() if cuda else 0,
        "triton": distribution_version("triton"),
        "c_compiler": shutil.which("cc") or shutil.which("gcc") or "none: Triton cannot build its launcher",
        "imports": {name: import_outcome(name) for name in ("causal_conv1d", "mamba_ssm")},
        "fused_kernel": "loads" if kernel is not None else why,
        "auto_backend": auto_backend(resolve_backend, torch.device("cuda" if cuda else "cpu")),
    }
    if cuda:
        props = torch.cuda.get_device_properties(0)
        report["device"] = {"name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                            "total_mb": round(props.total_memory / 2**20),
                            "bf16_supported": torch.cuda.is_bf16_supported()}
        report["triton_launch"] = triton_launch()
    else:
        report["triton_launch"] = NO_CUDA
    problem = gpu_problem(driver, torch_facts(kernels=True)) if driver is not None else None
    if problem is not None:
        report["warning"] = str(problem)
    return report


def auto_backend(resolve: Any, device: Any) -> str:
    """The path `backend: auto` takes on `device`, or why it refuses to (a GPU whose kernels do not load)."""
    try:
        return resolve("auto", device)
    except Exception as exc:  # model.backend.BackendUnavailable: never a silent fall-back to the torch path
        return f"refused: {first_line(exc)}"


def distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def import_outcome(module: str) -> dict[str, str]:
    """The installed distribution's version and whether `import module` works; its exact error when not."""
    outcome = {"installed": distribution_version(module.replace("_", "-"))}
    try:
        importlib.import_module(module)
        outcome["import"] = "ok"
    except Exception as exc:  # ImportError for a build without its CUDA extension, OSError for a CUDA mismatch, ...
        outcome["import"] = f"{type(exc).__name__}: {str(exc).strip()}"
    return outcome


def triton_launch() -> dict[str, Any] | str:
    """The vector add compiled and launched (the first launch compiles it), and its answer checked."""
    import torch

    try:
        from bench.gpu_sections.triton_add import vector_add
    except Exception as exc:  # Triton not installed, or a Triton its torch cannot use
        return f"cannot import triton: {first_line(exc)}"
    x = torch.arange(10_000, dtype=torch.float32, device="cuda")
    start = time.perf_counter()
    try:
        out = vector_add(x, 2 * x)
        torch.cuda.synchronize()
    except Exception as exc:  # no C compiler, an unsupported GPU, a PTX the driver is too old for
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip()[-2000:]}"}
    return {"ok": bool(torch.equal(out, 3 * x)), "first_launch_s": round(time.perf_counter() - start, 2)}
