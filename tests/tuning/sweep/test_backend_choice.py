"""The sweep's `backend:` line and its check at start (tuning/sweep/backend_choice.py): which Mamba-2 path trials
take and why; a GPU here that cannot train stops the sweep in one line. GPU facts faked where they enter."""

from __future__ import annotations

import pytest

from tests.tuning.cluster.fake_gpu import CU128_TORCH, CU130_TORCH_BLIND, KERNELS_MISSING_TORCH, NEW_DRIVER, OLD_DRIVER
from tuning.cluster import gpu_ready
from tuning.cluster.gpu_ready import GpuNotReady, TorchFacts
from tuning.errors import UsageError
from tuning.sweep.backend_choice import backend_line, check_backend_at_start, describe_backend


@pytest.mark.parametrize(("setting", "gpu_trials", "here", "line"), [
    ("auto", False, None, "backend: torch (auto: trials run on CPU)"),
    ("torch", True, (NEW_DRIVER, CU128_TORCH), "backend: torch (model.backend=torch)"),
    ("torch", False, None, "backend: torch (model.backend=torch)"),
    ("auto", True, (NEW_DRIVER, CU128_TORCH),
     "backend: mamba_ssm fused kernels (auto: GPU trials; the kernels load here, NVIDIA H200)"),
    ("mamba_ssm", True, (NEW_DRIVER, CU128_TORCH),
     "backend: mamba_ssm fused kernels (model.backend=mamba_ssm; the kernels load here, NVIDIA H200)"),
    ("auto", True, None, "backend: auto, decided on each GPU worker (this machine has no GPU; mamba-tune doctor "
                         "checks the workers' kernels)"),
    ("mamba_ssm", True, None, "backend: mamba_ssm fused kernels (model.backend=mamba_ssm; this machine has no GPU; "
                              "mamba-tune doctor checks the workers' kernels)"),
    ("auto", True, (NEW_DRIVER, KERNELS_MISSING_TORCH),
     "backend: auto, but the kernels do not load here (import mamba_ssm: ImportError: x): GPU trials here stop"),
])
def test_backend_choice_says_which_path_and_why(setting, gpu_trials, here, line):
    assert describe_backend(setting, gpu_trials, here) == line


def test_backend_choice_line_reads_this_machines_gpu_only_for_gpu_trials(monkeypatch):
    def no_gpu_facts():
        raise AssertionError("nvidia-smi was asked for CPU trials")

    monkeypatch.setattr(gpu_ready, "driver_facts", no_gpu_facts)
    assert backend_line("auto", gpu_trials=False) == "backend: torch (auto: trials run on CPU)"
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: NEW_DRIVER)
    monkeypatch.setattr(gpu_ready, "torch_facts", lambda kernels: CU128_TORCH if kernels else None)
    assert backend_line("auto", gpu_trials=True) == ("backend: mamba_ssm fused kernels (auto: GPU trials; the kernels "
                                                     "load here, NVIDIA H200)")
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: None)
    assert backend_line("auto", gpu_trials=True).startswith("backend: auto, decided on each GPU worker")


def test_backend_choice_at_start_stops_gpu_trials_on_a_gpu_torch_cannot_use(monkeypatch):
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: OLD_DRIVER)
    monkeypatch.setattr(gpu_ready, "torch_facts", lambda kernels: CU130_TORCH_BLIND)
    with pytest.raises(GpuNotReady, match=r"^the NVIDIA driver 535.104.05 supports CUDA 12.2, torch 2.10.0\+cu130 is "
                                          r"built for CUDA 13.0: torch sees no GPU and would train on the CPU; fix: "):
        check_backend_at_start("auto", gpu_trials=True)
    check_backend_at_start("auto", gpu_trials=False)  # CPU trials: this machine's GPU is not theirs to check


def test_backend_choice_at_start_stops_gpu_trials_whose_kernels_do_not_load_unless_torch_is_chosen(monkeypatch):
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: NEW_DRIVER)
    monkeypatch.setattr(gpu_ready, "torch_facts",
                        lambda kernels: KERNELS_MISSING_TORCH if kernels else TorchFacts("2.10.0+cu128", "12.8", 1))
    with pytest.raises(GpuNotReady, match=r"^mamba-ssm's fused kernels do not load on this GPU machine \(import "
                                          r"mamba_ssm: ImportError: x\).*or set model.backend=torch"):
        check_backend_at_start("auto", gpu_trials=True)
    check_backend_at_start("torch", gpu_trials=True)  # chosen knowingly


def test_backend_choice_at_start_refuses_the_kernels_on_cpu_trials(monkeypatch):
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: None)
    with pytest.raises(UsageError, match=r"^model.backend mamba_ssm, and the trials run on CPU .* set "
                                         r"model.backend=auto$"):
        check_backend_at_start("mamba_ssm", gpu_trials=False)
    check_backend_at_start("mamba_ssm", gpu_trials=True)  # no GPU here: each worker decides
