"""The plain sequential recurrence that ssd_scan must equal, written step by step."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequential_scan(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                    dt_limit=(0.0, float("inf")), initial_states=None):
    """h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T;  y_t = h_t C_t + D x_t;  y_t *= silu(z_t).

    x: (batch, seqlen, nheads, headdim); dt: (batch, seqlen, nheads); A: (nheads,);
    B, C: (batch, seqlen, ngroups, d_state). Returns y (batch, seqlen, nheads, headdim)
    and the last state (batch, nheads, headdim, d_state).
    """
    batch, seqlen, nheads, headdim = x.shape
    ngroups, d_state = B.shape[2], B.shape[3]
    heads_per_group = nheads // ngroups
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = F.softplus(dt)
    dt = dt.clamp(*dt_limit)
    B = B.repeat_interleave(heads_per_group, dim=2)  # (b, l, h, n)
    C = C.repeat_interleave(heads_per_group, dim=2)  # (b, l, h, n)
    h = torch.zeros(batch, nheads, headdim, d_state, dtype=x.dtype) if initial_states is None else initial_states
    ys = []
    for t in range(seqlen):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]  # (b, h, 1, 1)
        inject = (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None, :]  # (b, h, p, n)
        h = decay * h + inject
        y = (h * C[:, t, :, None, :]).sum(-1)  # (b, h, p)
        if D is not None:
            y = y + x[:, t] * (D if D.dim() == 2 else D[:, None])
        ys.append(y)
    y = torch.stack(ys, dim=1)
    if z is not None:
        y = y * F.silu(z)
    return y, h
