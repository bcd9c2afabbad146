"""How two tensors that should agree are compared: upstream's allclose rule, reported, not asserted.

Tolerances are those mamba-ssm's own tests use (state-spaces/mamba at tag v2.3.2.post1), kernel against
reference:
  outputs, fp32: rtol 1e-2, atol 3e-3 -- tests/ops/triton/test_ssd.py:32 (test_chunk_state_varlen, the SSD
      kernels against their reference; the only SSD tolerance at that tag, the same for fp32, fp16, bf16);
  outputs, bf16: rtol 3e-2, atol 5e-2 -- tests/ops/test_selective_scan.py:44-45 (the bf16 kernel against the
      fp32 reference);
  gradients: the outputs' rtol and atol doubled -- tests/ops/test_selective_scan.py:135 (the input's gradient
      at `rtol * 2, atol * 2`); dt_bias's at rtol x5, atol x10 -- line 136 (the gradient of delta, i.e. dt).
No upstream test at that tag compares mamba_split_conv1d_scan_combined or the Mamba2 module with a
reference (tests/test_determinism.py compares the kernel with itself, atol = rtol = 1e-2, bf16).
Note: mamba_ssm's Triton matmuls run in TF32 on fp32 inputs whatever torch's flags say, which is why
"IEEE" fp32 is judged at 1e-2 and not at float32's own precision.
"""

from __future__ import annotations

from typing import Any

import torch

OUTPUT_TOLERANCE = {"fp32": {"rtol": 1e-2, "atol": 3e-3}, "bf16": {"rtol": 3e-2, "atol": 5e-2}}
GRADIENT_FACTOR = {"rtol": 2, "atol": 2}  # test_selective_scan.py:135
DT_GRADIENT_FACTOR = {"rtol": 5, "atol": 10}  # test_selective_scan.py:136


def gradient_tolerance(precision: str, name: str) -> dict[str, float]:
    factor = DT_GRADIENT_FACTOR if name.endswith("dt_bias") else GRADIENT_FACTOR
    return {k: v * factor[k] for k, v in OUTPUT_TOLERANCE[precision].items()}


def compare(ours: torch.Tensor, reference: torch.Tensor, rtol: float, atol: float) -> dict[str, Any]:
    """torch.allclose's rule (|ours - reference| <= atol + rtol |reference|), with how far it is from holding:
    the largest difference, the reference's scale, and how many elements break the rule.

    ours, reference: the same shape, any dims."""
    ours, reference = ours.detach().float(), reference.detach().float()
    difference = (ours - reference).abs()
    outside = int((difference > atol + rtol * reference.abs()).sum()) + int((~torch.isfinite(ours)).sum())
    return {"within": outside == 0, "max_abs_diff": float(difference.max()), "max_abs_reference":
            float(reference.abs().max()), "elements_outside": outside, "elements": reference.numel(),
            "rtol": rtol, "atol": atol}
