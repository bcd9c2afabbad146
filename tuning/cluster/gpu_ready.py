"""Whether this machine's NVIDIA GPU can train: its driver, the CUDA torch was built for, and mamba-ssm's kernels.

A machine where nvidia-smi answers but torch sees no CUDA (a driver older than the CUDA torch was built for, or a
CPU-only torch) would train on the CPU while its user thinks it trains on the GPU; one whose torch sees the GPU but
whose mamba-ssm kernels do not import stops every GPU trial with model.backend auto (model/backend.py). The facts
are gathered at the edge (driver_facts: nvidia-smi; torch_facts: torch and the kernels' import) into small frozen
dataclasses; the verdict over them (gpu_problem) is pure.

`python -m tuning.cluster.gpu_ready` (`make`, after the GPU install) prints one line `error: ...` on stderr and
exits 2 on a problem, else one line saying what is ready (exit 0; also where no GPU answers: nothing to check).
`mamba-tune doctor` fails on the same verdict on any node, `sweep` and `train` stop on it at start.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass

from model.backend import KERNELS_FIX, TORCH_PATH_FIX
from tuning.errors import UsageError

SMI_TIMEOUT_S = 20.0  # nvidia-smi without persistence mode can take seconds to answer
# `make KERNEL_CUDA=N` installs torch 2.10.0 built for this CUDA (the Makefile's GPU install): the driver must run it
MAKE_TORCH_CUDA = {"12": "12.8", "13": "13.0"}


class GpuNotReady(UsageError):
    """This machine's GPU cannot train as asked: one line naming what, the versions involved, and the fix."""


@dataclass(frozen=True)
class DriverFacts:
    """What nvidia-smi says about this machine."""

    driver: str  # the NVIDIA driver's version, "535.104.05"
    cuda: str | None  # the newest CUDA the driver runs ("CUDA Version" in nvidia-smi's header), "12.2"; None: unsaid
    gpus: tuple[str, ...] = ()  # each GPU's name, ("NVIDIA H200",)


@dataclass(frozen=True)
class TorchFacts:
    """What torch (and the kernels' import) says on this machine."""

    version: str  # torch.__version__, "2.10.0+cu128"
    cuda: str | None  # torch.version.cuda, the CUDA it was built for, "12.8"; None: a CPU-only build
    devices: int  # GPUs torch sees: torch.cuda.device_count() where torch.cuda.is_available(), else 0
    warning: str = ""  # torch's own warning when CUDA does not initialise (its first line); "" otherwise
    kernels_missing: str | None = None  # model/backend.py's what-failed of the kernels' import; "": they load;
    # None: not tried (not asked for, or torch sees no GPU)


@dataclass(frozen=True)
class GpuProblem:
    what: str  # what is wrong, naming the versions
    fix: str

    def __str__(self) -> str:
        return f"{self.what}; fix: {self.fix}"


# --- the edge: nvidia-smi and torch ---------------------------------------------------------------------------------

def driver_facts() -> DriverFacts | None:
    """nvidia-smi's driver, CUDA version and GPUs; None where there is no nvidia-smi, or it answers with no GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    listed = smi("--query-gpu=name,driver_version", "--format=csv,noheader")
    if listed is None:
        return None
    gpus, driver = parse_gpu_query(listed)
    if driver is None:
        return None
    return DriverFacts(driver, parse_cuda_version(smi() or ""), gpus)


def smi(*args: str) -> str | None:
    """nvidia-smi's output, or None when there is none or it fails (no driver loaded, no GPU, a hang)."""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def torch_facts(kernels: bool) -> TorchFacts:
    """torch's version, its CUDA build and the GPUs it sees; with `kernels`, where it sees one, whether mamba-ssm's
    kernels import (model/backend.py, once per process). Imports torch: call it only where nvidia-smi answers."""
    import torch

    with warnings.catch_warnings(record=True) as caught:  # "CUDA initialization: The NVIDIA driver ... is too old"
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    devices = torch.cuda.device_count() if available else 0
    said = next((_first_sentence(str(w.message)) for w in caught if str(w.message).strip()), "")
    missing = None
    if kernels and devices:
        from model.backend import load_fused_kernel

        missing = load_fused_kernel()[1]
    return TorchFacts(torch.__version__, torch.version.cuda, devices, said, missing)


def _first_sentence(text: str) -> str:
    """"CUDA initialization: The NVIDIA driver on your system is too old (found version 12020)" of torch's warning."""
    return text.strip().splitlines()[0].split(". ")[0].split(" (Triggered internally")[0][:200]


# --- pure: parsing and the verdict -----------------------------------------------------------------------------------

def parse_gpu_query(text: str) -> tuple[tuple[str, ...], str | None]:
    """`nvidia-smi --query-gpu=name,driver_version --format=csv,noheader` -> (GPU names, the driver's version)."""
    names, driver = [], None
    for line in text.strip().splitlines():
        name, _, version = line.rpartition(",")
        if name.strip() and re.fullmatch(r"\d+(\.\d+)*", version.strip()):
            names.append(name.strip())
            driver = version.strip()
    return tuple(names), driver


def parse_cuda_version(header: str) -> str | None:
    """"12.2" from nvidia-smi's header line `| NVIDIA-SMI 535.104.05  Driver Version: 535.104.05  CUDA Version: 12.2 |`;
    None when it says none."""
    found = re.search(r"CUDA Version\s*:\s*(\d+(?:\.\d+)?)", header)
    return found.group(1) if found else None


def gpu_problem(driver: DriverFacts, torch: TorchFacts) -> GpuProblem | None:
    """What stops this machine's GPU from training, or None. The kernels are judged only where they were tried
    (torch.kernels_missing not None)."""
    versions = f"the NVIDIA driver {driver.driver} supports CUDA {driver.cuda or '(nvidia-smi does not say)'}"
    if torch.cuda is None:
        return GpuProblem(f"torch {torch.version} is a CPU-only build on a machine with an NVIDIA GPU "
                          f"({describe_gpus(driver.gpus)}; {versions}): it sees no GPU and would train on the CPU",
                          f"the torch of your CUDA ({_make_hint(driver.cuda)})")
    if not torch.devices:
        if driver.cuda is not None and _major(driver.cuda) < _major(torch.cuda):  # minor versions: compatible
            return GpuProblem(f"{versions}, torch {torch.version} is built for CUDA {torch.cuda}: torch sees no GPU "
                              "and would train on the CPU",
                              f"an NVIDIA driver for CUDA {_major(torch.cuda)} or newer, or the torch of your CUDA "
                              f"({_make_hint(driver.cuda)})")
        said = f" ({torch.warning})" if torch.warning else ""
        return GpuProblem(f"nvidia-smi lists {describe_gpus(driver.gpus)} ({versions}), and torch {torch.version} "
                          f"(built for CUDA {torch.cuda}) sees none{said}: it would train on the CPU",
                          "check CUDA_VISIBLE_DEVICES and that this container was given the GPUs "
                          "(docker run --gpus all)")
    if torch.kernels_missing:
        return GpuProblem(f"mamba-ssm's fused kernels do not load on this GPU machine ({torch.kernels_missing}), "
                          "and model.backend auto trains on the GPU with them",
                          f"{KERNELS_FIX}; {TORCH_PATH_FIX}")
    return None


def ready_line(driver: DriverFacts, torch: TorchFacts) -> str:
    """One line on a machine whose GPU can train."""
    kernels = ", mamba-ssm's fused kernels load" if torch.kernels_missing == "" else ""  # None: not checked
    return (f"GPU ready: {describe_gpus(driver.gpus)} (driver {driver.driver}, CUDA {driver.cuda or '?'}), "
            f"torch {torch.version} (CUDA {torch.cuda}) sees {torch.devices} GPU(s){kernels}")


def describe_gpus(names: tuple[str, ...]) -> str:
    """("NVIDIA H200",) -> "NVIDIA H200"; four H100s -> "4 x NVIDIA H100 80GB HBM3"; () -> "a GPU"."""
    if not names:
        return "a GPU"
    return ", ".join(name if count == 1 else f"{count} x {name}" for name, count in Counter(names).items())


def _make_hint(driver_cuda: str | None) -> str:
    """The `make` that installs a torch this driver runs, or what driver `make`'s torches need."""
    fits = [kernel for kernel, cuda in MAKE_TORCH_CUDA.items()
            if driver_cuda is not None and _major(driver_cuda) >= _major(cuda)]
    if fits:
        return f"make KERNEL_CUDA={fits[-1]}, docs/gpus.md"
    needs = " or ".join(f"CUDA {cuda} (KERNEL_CUDA={kernel})" for kernel, cuda in MAKE_TORCH_CUDA.items())
    return f"`make` installs torch for {needs}: this driver runs neither, so a newer driver first"


def _major(cuda: str) -> int:
    """12 of "12.8". A driver runs every CUDA of its major (CUDA's minor-version compatibility, from driver 525 for
    CUDA 12 and 580 for 13): only the major decides whether torch can see the GPU at all."""
    return _version(cuda)[0]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


# --- what the sweep, train and make call ----------------------------------------------------------------------------

def require_gpu_ready(backend: str) -> tuple[DriverFacts, TorchFacts] | None:
    """Where nvidia-smi answers: raise GpuNotReady when its GPU cannot train with model.backend `backend` (the
    kernels are checked unless it is "torch"), else its facts. None, importing no torch, where no GPU answers."""
    driver = driver_facts()
    if driver is None:
        return None
    facts = torch_facts(kernels=backend != "torch")
    if problem := gpu_problem(driver, facts):
        raise GpuNotReady(str(problem))
    return driver, facts


def main() -> int:
    """`python -m tuning.cluster.gpu_ready` (make runs it after a GPU install): one line, exit 2 on a problem."""
    try:
        ready = require_gpu_ready("auto")
    except GpuNotReady as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(ready_line(*ready) if ready else
          "GPU check: no NVIDIA GPU answers here (no nvidia-smi, or it lists none): nothing to check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
