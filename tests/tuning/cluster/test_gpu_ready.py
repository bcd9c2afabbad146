"""tuning/cluster/gpu_ready.py: a GPU that nvidia-smi lists and torch cannot use, or whose kernels do not import,
is said in one line naming the versions and the fix; nvidia-smi and torch are faked where they enter."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.cli import ROOT
from tests.tuning.cluster.fake_gpu import (
    CU128_TORCH,
    CU130_TORCH_BLIND,
    HEADER,
    NEW_DRIVER,
    OLD_DRIVER,
    blind_gpu_env,
    blind_gpu_verdict,
    fake_nvidia_smi,
    path_with,
)
from tuning.cluster import gpu_ready
from tuning.cluster.gpu_ready import DriverFacts, GpuNotReady, TorchFacts, gpu_problem


def test_gpu_ready_parses_nvidia_smis_driver_gpus_and_cuda_version():
    assert gpu_ready.parse_gpu_query("NVIDIA H100 80GB HBM3, 535.104.05\nNVIDIA H100 80GB HBM3, 535.104.05\n") == (
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"), "535.104.05")
    assert gpu_ready.parse_gpu_query("No devices were found\n") == ((), None)
    assert gpu_ready.parse_cuda_version(HEADER.format(driver="535.104.05", cuda="12.2")) == "12.2"
    assert gpu_ready.parse_cuda_version("| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   CUDA Version: 13.0  |") \
        == "13.0"
    assert gpu_ready.parse_cuda_version("| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   |") is None


def test_gpu_ready_a_driver_older_than_torchs_cuda_is_one_line_naming_both_versions():
    problem = str(gpu_problem(OLD_DRIVER, CU130_TORCH_BLIND))
    assert problem == ("the NVIDIA driver 535.104.05 supports CUDA 12.2, torch 2.10.0+cu130 is built for CUDA 13.0: "
                       "torch sees no GPU and would train on the CPU; fix: an NVIDIA driver for CUDA 13 or newer, "
                       "or the torch of your CUDA (make KERNEL_CUDA=12, docs/gpus.md)")


@pytest.mark.parametrize(("driver_cuda", "hint"), [
    ("11.8", "`make` installs torch for CUDA 12.8 (KERNEL_CUDA=12) or CUDA 13.0 (KERNEL_CUDA=13): this driver runs "
             "neither, so a newer driver first"),
    ("12.2", "make KERNEL_CUDA=12, docs/gpus.md"),  # a CUDA 12 driver runs torch's CUDA 12.8: minor versions agree
    ("12.9", "make KERNEL_CUDA=12, docs/gpus.md")])
def test_gpu_ready_names_the_make_whose_torch_the_driver_runs(driver_cuda, hint):
    driver = DriverFacts("535.86.15", driver_cuda, ("NVIDIA L4",))
    problem = gpu_problem(driver, TorchFacts("2.13.0+cu132", "13.2", 0))
    assert problem.what.startswith(f"the NVIDIA driver 535.86.15 supports CUDA {driver_cuda}, torch 2.13.0+cu132 is "
                                   "built for CUDA 13.2: torch sees no GPU")
    assert problem.fix == f"an NVIDIA driver for CUDA 13 or newer, or the torch of your CUDA ({hint})"


def test_gpu_ready_blames_no_driver_of_torchs_cuda_major_for_a_gpu_torch_does_not_see():
    """CUDA's minor-version compatibility: a driver for CUDA 12.2 runs torch built for 12.8, so a torch that sees no
    GPU there is not the driver's doing: the line says what to check instead."""
    problem = gpu_problem(DriverFacts("535.104.05", "12.2", ("NVIDIA L4",)), TorchFacts("2.10.0", "12.8", 0))
    assert problem.what.startswith("nvidia-smi lists NVIDIA L4 (the NVIDIA driver 535.104.05 supports CUDA 12.2), "
                                   "and torch 2.10.0 (built for CUDA 12.8) sees none")
    assert problem.fix.startswith("check CUDA_VISIBLE_DEVICES")


def test_gpu_ready_a_cpu_only_torch_on_a_gpu_machine_is_one_line():
    problem = str(gpu_problem(NEW_DRIVER, TorchFacts("2.13.0+cpu", None, 0)))
    assert problem == ("torch 2.13.0+cpu is a CPU-only build on a machine with an NVIDIA GPU (NVIDIA H200; the NVIDIA "
                       "driver 580.65.06 supports CUDA 13.0): it sees no GPU and would train on the CPU; fix: the "
                       "torch of your CUDA (make KERNEL_CUDA=13, docs/gpus.md)")


def test_gpu_ready_a_driver_new_enough_and_no_gpu_seen_points_at_the_visibility():
    problem = str(gpu_problem(NEW_DRIVER, TorchFacts("2.10.0+cu128", "12.8", 0, "CUDA initialization: no device")))
    assert problem.startswith("nvidia-smi lists NVIDIA H200 (the NVIDIA driver 580.65.06 supports CUDA 13.0), and "
                              "torch 2.10.0+cu128 (built for CUDA 12.8) sees none (CUDA initialization: no device): it "
                              "would train on the CPU; fix: check CUDA_VISIBLE_DEVICES")


def test_gpu_ready_kernels_that_do_not_import_where_torch_sees_the_gpu_is_one_line():
    missing = "import mamba_ssm: ModuleNotFoundError: No module named 'selective_scan_cuda'"
    problem = str(gpu_problem(NEW_DRIVER, TorchFacts("2.10.0+cu128", "12.8", 1, kernels_missing=missing)))
    assert problem.startswith(f"mamba-ssm's fused kernels do not load on this GPU machine ({missing}), and "
                              "model.backend auto trains on the GPU with them; fix: install them: `make` on a machine "
                              "with an NVIDIA GPU installs the release wheels (docs/gpus.md")
    assert problem.endswith("; or set model.backend=torch to train on the slower torch path knowingly")
    assert "\n" not in problem


def test_gpu_ready_a_gpu_that_can_train_is_no_problem_and_one_line():
    assert gpu_problem(NEW_DRIVER, CU128_TORCH) is None
    assert gpu_problem(NEW_DRIVER, TorchFacts("2.10.0+cu128", "12.8", 1)) is None  # kernels not tried: not judged
    assert gpu_ready.ready_line(DriverFacts("570.86.15", "12.8", ("NVIDIA H100 80GB HBM3",) * 4), CU128_TORCH) == (
        "GPU ready: 4 x NVIDIA H100 80GB HBM3 (driver 570.86.15, CUDA 12.8), torch 2.10.0+cu128 (CUDA 12.8) sees 1 "
        "GPU(s), mamba-ssm's fused kernels load")


def test_gpu_ready_reads_nvidia_smi_at_the_edge(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", path_with(fake_nvidia_smi(tmp_path / "bin", gpus=("NVIDIA A10G", "NVIDIA A10G"))))
    assert gpu_ready.driver_facts() == DriverFacts("535.104.05", "12.2", ("NVIDIA A10G", "NVIDIA A10G"))
    monkeypatch.setenv("PATH", path_with(fake_nvidia_smi(tmp_path / "broken", fails=True)))
    assert gpu_ready.driver_facts() is None  # installed, no driver answering: no GPU here to check
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu_ready.driver_facts() is None


def test_gpu_ready_reads_torch_at_the_edge(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # torch that sees no GPU, whichever build this is
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    here = gpu_ready.torch_facts(kernels=True)  # no GPU seen: kernels not tried
    assert (here.version, here.cuda, here.devices, here.kernels_missing) == (torch.__version__, torch.version.cuda, 0,
                                                                               None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr("model.backend.load_fused_kernel", lambda: (None, "import mamba_ssm: ImportError: x"))
    seen = gpu_ready.torch_facts(kernels=True)
    assert (seen.devices, seen.kernels_missing) == (2, "import mamba_ssm: ImportError: x")
    assert gpu_ready.torch_facts(kernels=False).kernels_missing is None


def test_gpu_ready_require_raises_the_line_where_a_gpu_answers_and_is_silent_where_none_does(monkeypatch):
    def no_torch(kernels):
        raise AssertionError("torch was asked on a machine without a GPU")

    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: None)
    monkeypatch.setattr(gpu_ready, "torch_facts", no_torch)
    assert gpu_ready.require_gpu_ready("auto") is None
    asked = []
    monkeypatch.setattr(gpu_ready, "driver_facts", lambda: OLD_DRIVER)
    monkeypatch.setattr(gpu_ready, "torch_facts", lambda kernels: asked.append(kernels) or CU130_TORCH_BLIND)
    with pytest.raises(GpuNotReady, match=r"^the NVIDIA driver 535.104.05 supports CUDA 12.2, torch 2.10.0\+cu130 "
                                          r"is built for CUDA 13.0: torch sees no GPU"):
        gpu_ready.require_gpu_ready("torch")
    assert asked == [False]  # model.backend torch: the kernels are not asked for


def run_gpu_ready(**env: str) -> subprocess.CompletedProcess:
    """`python -m tuning.cluster.gpu_ready` with this checkout importable and only `env` besides."""
    return subprocess.run([sys.executable, "-m", "tuning.cluster.gpu_ready"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={"PYTHONPATH": str(ROOT), **env})


def test_gpu_ready_module_on_a_gpu_machine_whose_torch_sees_no_gpu_exits_2_in_one_line_naming_both_versions(tmp_path):
    done = run_gpu_ready(**blind_gpu_env(tmp_path / "bin"))
    what, fix = blind_gpu_verdict()  # a CPU build: the CPU-only line; a CUDA build, its GPU hidden: "sees none"
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {what}") and f"; fix: {fix}" in done.stderr, done.stderr


def test_gpu_ready_module_without_nvidia_smi_has_nothing_to_check(tmp_path):
    done = run_gpu_ready(PATH=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("GPU check: no NVIDIA GPU answers here (no nvidia-smi, or it lists none): nothing to "
                           "check\n")


def test_gpu_ready_without_nvidia_smi_imports_no_torch(tmp_path):
    code = "import sys, tuning.cluster.gpu_ready as g\ng.main()\nprint('torch' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PATH": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "False", done.stdout + done.stderr
