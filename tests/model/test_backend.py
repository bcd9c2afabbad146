"""Backend choice: mamba_ssm's kernels only where they can run, a clear error when forced."""

from __future__ import annotations

import builtins
import subprocess
import sys

import pytest
import torch

from model import backend
from model.mamba2 import Mamba2


@pytest.fixture()
def broken_mamba_ssm(monkeypatch):
    """mamba_ssm whose import raises RuntimeError, as on a machine without a CUDA driver."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith(("mamba_ssm", "causal_conv1d")):
            raise RuntimeError("Found no NVIDIA driver on your system.")
        return real_import(name, *args, **kwargs)

    backend.load_fused_kernel.cache_clear()
    monkeypatch.setattr(builtins, "__import__", fake_import)
    yield
    backend.load_fused_kernel.cache_clear()


def test_backend_auto_uses_torch_on_cpu():
    block = Mamba2(d_model=32, d_state=8, headdim=8)
    assert block.active_backend() == "torch"


def test_backend_import_guard_catches_runtime_errors(broken_mamba_ssm):
    kernel, why = backend.load_fused_kernel()
    assert kernel is None
    assert "RuntimeError: Found no NVIDIA driver" in why
    block = Mamba2(d_model=32, d_state=8, headdim=8)
    assert block.active_backend() == "torch"
    assert block(torch.randn(1, 5, 32)).shape == (1, 5, 32)


def test_backend_forced_mamba_ssm_that_cannot_import_fails_at_construction(broken_mamba_ssm):
    with pytest.raises(RuntimeError, match=r"backend 'mamba_ssm' cannot run: importing mamba_ssm .* failed "
                                           r"\(RuntimeError: Found no NVIDIA driver.*use backend='auto' or 'torch'"):
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


def test_backend_torch_is_always_torch():
    assert backend.resolve_backend("torch", torch.device("cuda")) == "torch"
