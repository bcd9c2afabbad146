"""Backend choice: mamba_ssm's kernels only where they can run; where they cannot, one line saying what failed and
how to install them, and `auto` on CUDA never falls back to the torch path unasked."""

from __future__ import annotations

import builtins
import subprocess
import sys

import pytest
import torch

from model import backend
from model.mamba2 import Mamba2

INSTALL = r"install them: `make` on a machine with an NVIDIA GPU installs the release wheels \(docs/gpus.md"


@pytest.fixture()
def fake_kernel_imports(monkeypatch):
    """Make the kernels' imports fail as given: {module: exception}; the cached import result is cleared around it."""
    real_import = builtins.__import__

    def fake(failures):
        def fake_import(name, *args, **kwargs):
            for module, exc in failures.items():
                if name == module or name.startswith(module + "."):
                    raise exc
            return real_import(name, *args, **kwargs)

        backend.load_fused_kernel.cache_clear()
        monkeypatch.setattr(builtins, "__import__", fake_import)

    yield fake
    backend.load_fused_kernel.cache_clear()


@pytest.fixture()
def broken_mamba_ssm(fake_kernel_imports):
    """mamba_ssm whose import raises RuntimeError, as on a machine without a CUDA driver."""
    fake_kernel_imports({"mamba_ssm": RuntimeError("Found no NVIDIA driver on your system."),
                         "causal_conv1d": RuntimeError("Found no NVIDIA driver on your system.")})


def test_backend_auto_uses_torch_on_cpu():
    block = Mamba2(d_model=32, d_state=8, headdim=8)
    assert block.active_backend() == "torch"


def test_backend_auto_on_cpu_never_imports_the_kernels(monkeypatch):
    def no_import():
        raise AssertionError("the kernels' import was tried on CPU")

    monkeypatch.setattr(backend, "load_fused_kernel", no_import)
    assert backend.resolve_backend("auto", torch.device("cpu")) == "torch"


def test_backend_import_records_each_import_that_failed_word_for_word(fake_kernel_imports):
    fake_kernel_imports({"mamba_ssm": ModuleNotFoundError("No module named 'selective_scan_cuda'"),
                         "causal_conv1d": ModuleNotFoundError("No module named 'causal_conv1d'")})
    kernel, why = backend.load_fused_kernel()
    assert kernel is None
    assert why == ("import mamba_ssm: ModuleNotFoundError: No module named 'selective_scan_cuda'; "
                   "import causal_conv1d: ModuleNotFoundError: No module named 'causal_conv1d'")


def test_backend_import_is_tried_once_and_kept(fake_kernel_imports, monkeypatch):
    fake_kernel_imports({})  # no import faked: only the cached result cleared
    tried = []
    monkeypatch.setattr(backend, "_import_error", lambda name: tried.append(name) or f"{name} broke")
    first = backend.load_fused_kernel()
    assert backend.load_fused_kernel() is first and tried == list(backend.KERNEL_MODULES)


def test_backend_import_guard_catches_runtime_errors(broken_mamba_ssm):
    kernel, why = backend.load_fused_kernel()
    assert kernel is None
    assert why.startswith("import mamba_ssm: RuntimeError: Found no NVIDIA driver")
    block = Mamba2(d_model=32, d_state=8, headdim=8)
    assert block.active_backend() == "torch"  # on CPU: the torch path, as asked
    assert block(torch.randn(1, 5, 32)).shape == (1, 5, 32)


def test_backend_auto_on_cuda_without_the_kernels_stops_in_one_line_never_falling_back(fake_kernel_imports):
    fake_kernel_imports({"mamba_ssm": ModuleNotFoundError("No module named 'selective_scan_cuda'"),
                         "causal_conv1d": ModuleNotFoundError("No module named 'causal_conv1d_cuda'")})
    with pytest.raises(backend.BackendUnavailable) as raised:
        backend.resolve_backend("auto", torch.device("cuda"))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("model.backend auto on cuda: mamba-ssm's fused kernels do not load (import mamba_ssm: "
                              "ModuleNotFoundError: No module named 'selective_scan_cuda'; import causal_conv1d: "
                              "ModuleNotFoundError: No module named 'causal_conv1d_cuda'); install them: `make` ")
    assert "docs/gpus.md" in message
    assert message.endswith("or set model.backend=torch to train on the slower torch path knowingly")


def test_backend_auto_on_cuda_with_the_kernels_takes_them(monkeypatch):
    monkeypatch.setattr(backend, "load_fused_kernel", lambda: (lambda *a, **k: None, ""))
    assert backend.resolve_backend("auto", torch.device("cuda", 0)) == "mamba_ssm"


def test_backend_forced_mamba_ssm_that_cannot_import_fails_at_construction(broken_mamba_ssm):
    with pytest.raises(backend.BackendUnavailable,
                       match=r"^model.backend mamba_ssm cannot run here: mamba-ssm's fused kernels do not load "
                             rf"\(import mamba_ssm: RuntimeError: Found no NVIDIA driver.*\); {INSTALL}.*"
                             r"; or set model.backend=auto or torch$"):
        Mamba2(d_model=32, d_state=8, headdim=8, backend="mamba_ssm")


def test_backend_forced_mamba_ssm_on_cpu_fails_naming_the_device(monkeypatch):
    monkeypatch.setattr(backend, "load_fused_kernel", lambda: (lambda *a, **k: None, ""))
    block = Mamba2(d_model=32, d_state=8, headdim=8, backend="mamba_ssm")
    with pytest.raises(RuntimeError, match=r"needs the module on a CUDA device, it is on cpu"):
        block(torch.randn(1, 4, 32))


def test_backend_model_imports_where_mamba_ssm_is_installed_but_cannot_load():
    """In a fresh interpreter: importing the model never imports mamba_ssm's kernels, and
    where `make test` installed mamba_ssm without CUDA its failure is caught."""
    code = (
        "import sys, torch\n"
        "from model.forecaster import Forecaster, ModelConfig\n"
        "assert 'mamba_ssm' not in sys.modules\n"
        "m = Forecaster(ModelConfig(n_features=3, d_model=32, headdim=8, d_state=8, n_layers=1))\n"
        "print(m.layers[0].mixer.active_backend(), m(torch.randn(2, 9, 3)).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch torch.Size([2, 1])"


def test_backend_module_imports_no_torch():
    """tuning/cluster/gpu_ready.py reads KERNELS_FIX from it on machines where the sweep's driver imports no torch."""
    code = "import sys, model.backend\nassert 'torch' not in sys.modules, 'torch imported'\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_backend_torch_is_always_torch():
    assert backend.resolve_backend("torch", torch.device("cuda")) == "torch"
