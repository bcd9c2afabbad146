"""A trivial Triton kernel, a vector add: whether Triton can compile and launch anything on this GPU.

Triton compiles a small C launcher with the machine's C compiler at the first launch: without one (a
CUDA runtime image with no gcc) every mamba_ssm kernel fails there, and so does this one, saying so.
Imported only where CUDA and Triton are.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y by the Triton kernel: x, y (n,) float32 on CUDA -> (n,)."""
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out
