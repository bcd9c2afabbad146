"""Section 2, parity: mamba_ssm's fused kernel (Mamba2 backend "mamba_ssm") against the pure-torch SSD.

At the default model settings (model/config.py: d_model 128, d_state 64, headdim 32, chunk 64), each of
sequence lengths 128 and 200 (two chunks; four, the last partial), ngroups 1 and 2, fp32 with IEEE
matmuls in torch (TF32 off for cuBLAS and cuDNN) and bf16 autocast (model/precision.py): the outputs,
the input's gradient and every parameter's gradient, judged as bench/gpu_sections/compare.py says.
Needs CUDA and the kernels; a layer that cannot build its fused backend is this section's error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.gpu_sections.compare import OUTPUT_TOLERANCE, compare, gradient_tolerance
from bench.gpu_sections.context import SectionContext, require_cuda

SEQLENS = (128, 200)
NGROUPS = (1, 2)
BATCH = 2  # as upstream's kernel tests


def run(context: SectionContext) -> dict[str, Any]:
    require_cuda()
    import torch

    from model.config import ModelConfig

    torch.backends.cuda.matmul.allow_tf32 = False  # IEEE fp32 in torch's matmuls and convolutions
    torch.backends.cudnn.allow_tf32 = False
    defaults = ModelConfig()
    cases = [one_case(dataclasses.replace(defaults, ngroups=ngroups), seqlen, precision)
             for precision in OUTPUT_TOLERANCE for ngroups in NGROUPS for seqlen in SEQLENS]
    return {"model": {k: getattr(defaults, k) for k in ("d_model", "d_state", "headdim", "expand", "chunk_size")},
            "batch": BATCH, "tf32": "off in torch; mamba_ssm's Triton kernels use it regardless",
            "all_within": all(c["output"]["within"] and c["gradients"]["within"] for c in cases), "cases": cases}


def one_case(config, seqlen: int, precision: str) -> dict[str, Any]:
    """The fused and the torch layer from one state_dict, one input, one upstream gradient."""
    import torch

    from model.forecaster import ResidualBlock
    from model.precision import autocast

    cuda = torch.device("cuda")
    torch.manual_seed(0)
    fused = ResidualBlock(dataclasses.replace(config, backend="mamba_ssm"), 0).mixer.to(cuda)  # as the Forecaster
    reference = ResidualBlock(dataclasses.replace(config, backend="torch"), 0).mixer.to(cuda)  # builds its layers
    reference.load_state_dict(fused.state_dict())
    u = torch.randn(BATCH, seqlen, config.d_model, device=cuda)  # (batch, seqlen, d_model)
    u_fused, u_reference = u.clone().requires_grad_(), u.clone().requires_grad_()
    with autocast(precision, cuda):
        out_fused, out_reference = fused(u_fused), reference(u_reference)  # (batch, seqlen, d_model)
    grad = torch.randn(out_reference.shape, device=cuda)
    out_fused.backward(grad.to(out_fused.dtype))
    out_reference.backward(grad.to(out_reference.dtype))
    grads = {"input": (u_fused.grad, u_reference.grad)} | {
        name: (p.grad, q.grad) for (name, p), q in zip(fused.named_parameters(), reference.parameters(), strict=True)}
    judged = {name: compare(ours, theirs, **gradient_tolerance(precision, name)) for name, (ours, theirs) in
              grads.items()}
    worst = max(judged, key=lambda n: judged[n]["max_abs_diff"] / (judged[n]["max_abs_reference"] or 1.0))
    return {"seqlen": seqlen, "ngroups": config.ngroups, "precision": precision, "backend": fused.active_backend(),
            "output": compare(out_fused, out_reference, **OUTPUT_TOLERANCE[precision]),
            "gradients": {"within": all(j["within"] for j in judged.values()),
                          "failing": [n for n, j in judged.items() if not j["within"]],
                          "worst_relative": {"name": worst, **judged[worst]}}}
