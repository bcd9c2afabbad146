"""GPU facts faked where they enter: an `nvidia-smi` script first on PATH, and torch's facts as gpu_ready reads them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tuning.cluster.gpu_ready import DriverFacts, TorchFacts

# nvidia-smi 535's header, as it prints it (its table of GPUs follows)
HEADER = """\
Tue Sep 12 10:00:00 2025
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}             Driver Version: {driver}   CUDA Version: {cuda}     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
"""

OLD_DRIVER = DriverFacts("535.104.05", "12.2", ("NVIDIA H100 80GB HBM3",))
NEW_DRIVER = DriverFacts("580.65.06", "13.0", ("NVIDIA H200",))  # runs every torch `make` installs (CUDA 12.8, 13.0)
CU130_TORCH_BLIND = TorchFacts("2.10.0+cu130", "13.0", 0)
CU128_TORCH = TorchFacts("2.10.0+cu128", "12.8", 1, kernels_missing="")
KERNELS_MISSING_TORCH = TorchFacts("2.10.0+cu128", "12.8", 1, kernels_missing="import mamba_ssm: ImportError: x")


def fake_nvidia_smi(folder: Path, driver: str = "535.104.05", cuda: str = "12.2",
                    gpus: tuple[str, ...] = ("NVIDIA H100 80GB HBM3",), fails: bool = False) -> Path:
    """An `nvidia-smi` in `folder` that answers as that driver does (or fails, as one without a loaded driver);
    -> `folder`, to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    listing = "\n".join(f"{name}, {driver}" for name in gpus)
    memory = "\n".join(f"{name}, 81559" for name in gpus)  # node_probe's query: name, memory.total in MiB
    script = folder / "nvidia-smi"
    if fails:
        body = ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\n"
                "exit 9\n")
    else:
        body = (f'case "$*" in\n  *--query-gpu=name,driver_version*) cat <<"EOF"\n{listing}\nEOF\n  ;;\n'
                f'  *--query-gpu=name,memory.total*) cat <<"EOF"\n{memory}\nEOF\n  ;;\n'
                f'  *) cat <<"EOF"\n{HEADER.format(driver=driver, cuda=cuda)}EOF\n  ;;\nesac\n')
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def path_with(folder: Path) -> str:
    """PATH with `folder` first."""
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def blind_gpu_env(folder: Path) -> dict[str, str]:
    """A machine whose nvidia-smi lists an H100 and whose torch, this machine's own, sees no GPU, for a subprocess (its
    torch cannot be faked): a fake nvidia-smi in `folder` first on PATH, its driver running this torch's CUDA (12.2
    beside a CPU build), and CUDA_VISIBLE_DEVICES="" to hide any real GPU from a CUDA build -> the variables to add to
    the subprocess's environment. What gpu_ready says of it: blind_gpu_verdict."""
    import torch

    driver_cuda = torch.version.cuda or "12.2"
    return {"PATH": path_with(fake_nvidia_smi(folder, cuda=driver_cuda)), "CUDA_VISIBLE_DEVICES": ""}


def blind_gpu_verdict() -> tuple[str, str]:
    """gpu_ready's verdict on blind_gpu_env with this machine's torch, whichever build it is, as (the start of what is
    wrong, the start of its fix)."""
    import torch

    if torch.version.cuda is None:  # a CPU build: it cannot see a GPU
        return (f"torch {torch.__version__} is a CPU-only build on a machine with an NVIDIA GPU (NVIDIA H100 80GB "
                "HBM3; the NVIDIA driver 535.104.05 supports CUDA 12.2): it sees no GPU and would train on the CPU",
                "the torch of your CUDA (")
    # a CUDA build under a driver that runs its CUDA: it sees none because CUDA_VISIBLE_DEVICES hides them
    return (f"nvidia-smi lists NVIDIA H100 80GB HBM3 (the NVIDIA driver 535.104.05 supports CUDA "
            f"{torch.version.cuda}), and torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees none",
            "check CUDA_VISIBLE_DEVICES")
