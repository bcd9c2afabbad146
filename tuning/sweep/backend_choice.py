"""Which Mamba-2 path a sweep's trials take, and why: the `backend:` line of its header, and the check at its start.

model.backend torch is the torch path everywhere; auto is the torch path on CPU trials and mamba-ssm's fused kernels
on GPU trials (model/backend.py stops a GPU trial whose kernels do not load, never falling back unasked); mamba_ssm
is the kernels, on GPUs only. Where this machine has a GPU (nvidia-smi answers) it is checked at start, before Ray
runs a trial (tuning/cluster/gpu_ready.py); where it has none, each GPU worker decides, and `mamba-tune doctor`
checks the workers' kernels. Nothing here imports torch on a machine without nvidia-smi.
"""

from __future__ import annotations

from tuning.cluster import gpu_ready
from tuning.cluster.gpu_ready import DriverFacts, TorchFacts, describe_gpus
from tuning.errors import UsageError

NO_GPU_HERE = "this machine has no GPU; mamba-tune doctor checks the workers' kernels"


def check_backend_at_start(setting: str, gpu_trials: bool) -> None:
    """Raise, in one line, where the sweep's trials cannot take the path model.backend (`setting`) asks for: the
    kernels on CPU trials, or GPU trials on this machine whose torch cannot use its GPU or, unless `setting` is
    torch, whose kernels do not load (gpu_ready.GpuNotReady)."""
    if setting == "mamba_ssm" and not gpu_trials:
        raise UsageError("model.backend mamba_ssm, and the trials run on CPU (resources.gpus_per_trial 0, or no GPU "
                         "on this cluster): mamba-ssm's fused kernels run on CUDA only; give the trials GPUs "
                         "(resources.gpus_per_trial), or set model.backend=auto")
    if gpu_trials:
        gpu_ready.require_gpu_ready(setting)


def backend_line(setting: str, gpu_trials: bool) -> str:
    """The header's `backend: ...` line, from this machine's facts (read only for GPU trials, torch only where
    nvidia-smi answers)."""
    here = None
    if gpu_trials and setting != "torch" and (driver := gpu_ready.driver_facts()) is not None:
        here = driver, gpu_ready.torch_facts(kernels=True)
    return describe_backend(setting, gpu_trials, here)


def describe_backend(setting: str, gpu_trials: bool, here: tuple[DriverFacts, TorchFacts] | None) -> str:
    """`backend: <the path> (<why>)` for model.backend `setting`, trials on GPUs or not, and this machine's GPU facts
    (None: no GPU answers here, or not read)."""
    if setting == "torch":
        return "backend: torch (model.backend=torch)"
    why = "auto: GPU trials" if setting == "auto" else "model.backend=mamba_ssm"
    if not gpu_trials:
        if setting == "auto":
            return "backend: torch (auto: trials run on CPU)"
        return "backend: mamba_ssm fused kernels (model.backend=mamba_ssm; trials run on CPU, where they cannot)"
    if here is None:
        if setting == "auto":
            return f"backend: auto, decided on each GPU worker ({NO_GPU_HERE})"
        return f"backend: mamba_ssm fused kernels ({why}; {NO_GPU_HERE})"
    driver, torch = here
    if torch.kernels_missing == "":
        return f"backend: mamba_ssm fused kernels ({why}; the kernels load here, {describe_gpus(driver.gpus)})"
    missing = torch.kernels_missing or "torch sees no GPU"
    return f"backend: {setting}, but the kernels do not load here ({missing}): GPU trials here stop"
