"""mamba_ssm's fused CUDA kernels against the pure-torch path. Runs only where CUDA is.

Judged at the tolerances mamba-ssm's own tests use (bench/gpu_sections/compare.py cites them; bench/gpu_check.py's
parity section reports against the same): its Triton matmuls run in TF32 even on fp32 inputs."""

from __future__ import annotations

import pytest
import torch

from bench.gpu_sections.compare import OUTPUT_TOLERANCE, gradient_tolerance
from model.backend import load_fused_kernel
from model.mamba2 import Mamba2
from model.ssd import ssd_scan
from tests.model.test_ssd import make_inputs

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (mamba_ssm kernels)")


@pytest.fixture()
def kernels():
    kernel, why = load_fused_kernel()
    assert kernel is not None, f"CUDA is present but mamba_ssm's kernels do not load: {why}"


@needs_cuda
@pytest.mark.parametrize("seqlen", [1, 100, 256])
def test_gpu_ssd_scan_matches_mamba_chunk_scan_combined(kernels, seqlen):
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    inputs = {k: v.float().cuda() for k, v in make_inputs(seqlen, nheads=8, headdim=32, d_state=64).items()}
    extras = {"D": torch.randn(8, device="cuda"), "z": torch.randn_like(inputs["x"]),
              "dt_bias": torch.randn(8, device="cuda"), "dt_softplus": True}
    ours, ours_final = ssd_scan(**inputs, chunk_size=64, **extras, return_final_states=True)
    theirs, theirs_final = mamba_chunk_scan_combined(**inputs, chunk_size=64, **extras, return_final_states=True)
    torch.testing.assert_close(ours, theirs, **OUTPUT_TOLERANCE["fp32"])
    torch.testing.assert_close(ours_final, theirs_final.float(), **OUTPUT_TOLERANCE["fp32"])


@needs_cuda
@pytest.mark.parametrize("ngroups", [1, 2])
def test_gpu_mamba2_fused_matches_torch_path_outputs_and_gradients(kernels, ngroups):
    torch.manual_seed(0)
    fused = Mamba2(d_model=128, d_state=64, headdim=32, ngroups=ngroups, chunk_size=64, backend="mamba_ssm").cuda()
    reference = Mamba2(d_model=128, d_state=64, headdim=32, ngroups=ngroups, chunk_size=64, backend="torch").cuda()
    reference.load_state_dict(fused.state_dict())
    u = torch.randn(4, 200, 128, device="cuda")
    assert fused.active_backend() == "mamba_ssm"
    out_fused, out_ref = fused(u), reference(u)
    torch.testing.assert_close(out_fused, out_ref, **OUTPUT_TOLERANCE["fp32"])
    grad = torch.randn_like(out_ref)
    out_fused.backward(grad)
    out_ref.backward(grad)
    for (name, p_fused), p_ref in zip(fused.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p_fused.grad, p_ref.grad, **gradient_tolerance("fp32", name), msg=lambda m, n=name: f"{n}: {m}")


@needs_cuda
def test_gpu_state_dict_loads_into_mamba_ssm_module_both_ways(kernels):
    from mamba_ssm.modules.mamba2 import Mamba2 as MambaSsmMamba2

    kwargs = {"d_model": 64, "d_state": 32, "headdim": 16, "ngroups": 2, "chunk_size": 64}
    ours = Mamba2(**kwargs).cuda()
    theirs = MambaSsmMamba2(**kwargs).cuda()
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}
    theirs.load_state_dict(ours.state_dict())
    u = torch.randn(2, 100, 64, device="cuda")
    torch.testing.assert_close(theirs(u), ours(u), **OUTPUT_TOLERANCE["fp32"])
    ours.load_state_dict(theirs.state_dict())


@needs_cuda
def test_gpu_bf16_autocast_fused_matches_torch_path(kernels):
    from model.precision import autocast

    torch.manual_seed(0)
    fused = Mamba2(d_model=128, d_state=64, headdim=32, chunk_size=64, backend="mamba_ssm").cuda()
    reference = Mamba2(d_model=128, d_state=64, headdim=32, chunk_size=64, backend="torch").cuda()
    reference.load_state_dict(fused.state_dict())
    u = torch.randn(4, 200, 128, device="cuda")
    with autocast("bf16", torch.device("cuda")):
        out_fused, out_ref = fused(u), reference(u)
    torch.testing.assert_close(out_fused.float(), out_ref.float(), **OUTPUT_TOLERANCE["bf16"])
    assert all(p.dtype == torch.float32 for p in fused.parameters())
