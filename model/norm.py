"""Gated RMSNorm with mamba_ssm's semantics (`mamba_ssm.ops.triton.layernorm_gated.RMSNorm`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class GatedRMSNorm(nn.Module):
    """RMSNorm over groups of `group_size` channels, gated by silu(z).

    norm_before_gate=False (mamba_ssm's Mamba2 default): norm(x * silu(z)) * weight;
    True: norm(x) * weight * silu(z). Computed in float32 (or float64), returned in x's dtype.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-5, group_size: int | None = None,
                 norm_before_gate: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.eps = eps
        self.group_size = hidden_size if group_size is None else group_size
        if hidden_size % self.group_size:
            raise ValueError(f"group_size must divide hidden_size, got {self.group_size} and {hidden_size}")
        self.norm_before_gate = norm_before_gate
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """x, z: (..., hidden_size) -> (..., hidden_size)."""
        work = torch.promote_types(x.dtype, torch.float32)
        h = x.to(work)
        gate = None if z is None else F.silu(z.to(work))
        if gate is not None and not self.norm_before_gate:
            h = h * gate
        grouped = h.unflatten(-1, (-1, self.group_size))  # (..., groups, group_size)
        h = (grouped * torch.rsqrt(grouped.square().mean(-1, keepdim=True) + self.eps)).flatten(-2)
        h = h * self.weight.to(work)
        if gate is not None and self.norm_before_gate:
            h = h * gate
        return h.to(x.dtype)
