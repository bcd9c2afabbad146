"""Chunked state-space duality (SSD) scan of Mamba-2, in pure PyTorch.

`ssd_scan` has the signature, shapes and semantics of mamba_ssm's fused Triton kernel
`mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined`, so the two are
interchangeable. Per head h, with a scalar decay A[h] < 0, it computes the recurrence

    dt_t  = clamp(softplus?(dt_t + dt_bias), *dt_limit)
    h_t   = exp(dt_t * A) * h_{t-1} + dt_t * x_t B_t^T      # (headdim, d_state)
    y_t   = h_t C_t + D * x_t                               # (headdim,)
    y_t  *= silu(z_t)                                       # when z is given

not step by step but in chunks of `chunk_size` steps: inside a chunk it is a masked,
attention-like matmul; between chunks only the (headdim, d_state) states are passed on,
one short loop over chunks (not over time steps).

Dims: batch, seqlen, nheads, headdim, ngroups, d_state; in comments b, l, h, p, g, n,
plus c (chunk index), q (position in a chunk), k (heads per group).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["ssd_scan"]


def ssd_scan(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    initial_states: torch.Tensor | None = None,
    return_final_states: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's selective scan, computed chunk by chunk.

    Args:
        x: (batch, seqlen, nheads, headdim) inputs.
        dt: (batch, seqlen, nheads) step sizes, before `dt_bias`, softplus and clamping.
        A: (nheads,) decay rates (negative for a stable scan).
        B: (batch, seqlen, ngroups, d_state) input projections; ngroups divides nheads.
        C: (batch, seqlen, ngroups, d_state) output projections.
        chunk_size: steps per chunk; any seqlen works (the last chunk is padded).
        D: (nheads,) or (nheads, headdim) skip connection, y += D * x.
        z: (batch, seqlen, nheads, headdim) gate, y *= silu(z).
        dt_bias: (nheads,) added to dt before the softplus.
        dt_softplus: apply softplus to dt + dt_bias.
        dt_limit: (lo, hi) dt is clamped to, always (as the kernel does: dt < 0 becomes 0).
        initial_states: (batch, nheads, headdim, d_state) state before the first step.
        return_final_states: also return the state after the last step.

    Returns:
        y: (batch, seqlen, nheads, headdim) in x's dtype, or (y, final_states) with
        final_states (batch, nheads, headdim, d_state) in the computation dtype.

    Computed in x's dtype, or float32 for half-precision inputs (as the kernel does).
    """
    _check_shapes(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states)
    batch, seqlen, nheads, headdim = x.shape
    ngroups, d_state = B.shape[2], B.shape[3]
    k = nheads // ngroups
    out_dtype = x.dtype
    work = torch.promote_types(x.dtype, torch.float32)

    # 1. Discretise: dt (b, l, h), then per-step log-decay dA = dt * A.
    dt = dt.to(work)
    if dt_bias is not None:
        dt = dt + dt_bias.to(work)
    if dt_softplus:
        dt = F.softplus(dt)  # threshold 20, as the kernel
    dt = dt.clamp(dt_limit[0], dt_limit[1])

    # 2. Pad to whole chunks. Padded steps have dt = 0: no decay, no input.
    pad = -seqlen % chunk_size
    nchunks = (seqlen + pad) // chunk_size
    q = chunk_size
    xw, Bw, Cw = x.to(work), B.to(work), C.to(work)
    if pad:
        xw = F.pad(xw, (0, 0, 0, 0, 0, pad))
        Bw = F.pad(Bw, (0, 0, 0, 0, 0, pad))
        Cw = F.pad(Cw, (0, 0, 0, 0, 0, pad))
        dt = F.pad(dt, (0, 0, 0, pad))
    x_dt = (xw * dt.unsqueeze(-1)).view(batch, nchunks, q, ngroups, k * headdim)  # (b, c, q, g, k*p)
    Bc = Bw.view(batch, nchunks, q, ngroups, d_state).transpose(2, 3)  # (b, c, g, q, n)
    Cc = Cw.view(batch, nchunks, q, ngroups, d_state).transpose(2, 3)  # (b, c, g, q, n)

    # 3. Cumulative log-decay inside each chunk.
    dA = (dt * A.to(work)).view(batch, nchunks, q, ngroups, k)  # (b, c, q, g, k)
    dA_cs = dA.permute(0, 1, 3, 4, 2).cumsum(-1)  # (b, c, g, k, q)

    # 4. Diagonal blocks: y_diag[i] = sum_{j<=i} (C_i . B_j) exp(cs_i - cs_j) dt_j x_j.
    CB = Cc @ Bc.transpose(-1, -2)  # (b, c, g, q_i, q_j)
    decay = _segment_decay(dA_cs)  # (b, c, g, k, q_i, q_j)
    scores = decay * CB.unsqueeze(3)  # (b, c, g, k, q_i, q_j)
    x_heads = x_dt.view(batch, nchunks, q, ngroups, k, headdim).permute(0, 1, 3, 4, 2, 5)  # (b, c, g, k, q, p)
    y = (scores @ x_heads).permute(0, 1, 4, 2, 3, 5)  # (b, c, q, g, k, p)

    # 5. State each chunk adds, decayed to the chunk's end: B^T (x dt exp(cs_end - cs)).
    to_end = torch.exp(dA_cs[..., -1:] - dA_cs)  # (b, c, g, k, q)
    x_to_end = x_dt.view(batch, nchunks, q, ngroups, k, headdim) * to_end.permute(0, 1, 4, 2, 3).unsqueeze(-1)
    chunk_states = Bc.transpose(-1, -2) @ x_to_end.view(batch, nchunks, q, ngroups, k * headdim).transpose(2, 3)
    # chunk_states: (b, c, g, n, k*p)

    # 6. Pass states from chunk to chunk: the state entering each chunk, and the last one.
    chunk_decay = torch.exp(dA_cs[..., -1])  # (b, c, g, k)
    state = _states_to_internal(initial_states, batch, ngroups, d_state, k, headdim, work, x.device)
    entering = []
    for c in range(nchunks):
        entering.append(state)
        step = chunk_states[:, c].view(batch, ngroups, d_state, k, headdim)
        state = step if state is None else state * chunk_decay[:, c, :, None, :, None] + step
    # state: (b, g, n, k, p)

    # 7. Off-diagonal blocks: y_off[i] = exp(cs_i) C_i . state entering the chunk.
    if any(s is not None for s in entering):
        zero = torch.zeros(batch, ngroups, d_state, k, headdim, dtype=work, device=x.device)
        start = torch.stack([zero if s is None else s for s in entering], dim=1)  # (b, c, g, n, k, p)
        y_off = (Cc @ start.view(batch, nchunks, ngroups, d_state, k * headdim)).view(
            batch, nchunks, ngroups, q, k, headdim
        )  # (b, c, g, q, k, p)
        from_start = torch.exp(dA_cs).permute(0, 1, 2, 4, 3).unsqueeze(-1)  # (b, c, g, q, k, 1)
        y = y + (y_off * from_start).transpose(2, 3)

    # 8. Skip connection and gate; drop the padding.
    y = y.reshape(batch, nchunks * q, nheads, headdim)[:, :seqlen]  # (b, l, h, p)
    if D is not None:
        y = y + xw[:, :seqlen] * (D.to(work) if D.dim() == 2 else D.to(work).unsqueeze(-1))
    if z is not None:
        y = y * F.silu(z.to(work))
    y = y.to(out_dtype)
    if not return_final_states:
        return y
    if state is None:  # seqlen == 0 cannot happen (checked); keeps type checkers quiet
        raise AssertionError("no chunk was scanned")
    final = state.permute(0, 1, 3, 4, 2).reshape(batch, nheads, headdim, d_state)  # (b, h, p, n)
    return y, final


def _segment_decay(dA_cs: torch.Tensor) -> torch.Tensor:
    """exp(cs_i - cs_j) for j <= i, else 0.

    dA_cs: (..., q) cumulative log-decay. Returns (..., q, q). The upper triangle is
    masked before the exp, so no inf (and no NaN gradient) is ever formed.
    """
    q = dA_cs.shape[-1]
    diff = dA_cs.unsqueeze(-1) - dA_cs.unsqueeze(-2)  # (..., q_i, q_j)
    causal = torch.ones(q, q, dtype=torch.bool, device=dA_cs.device).tril()
    return torch.exp(diff.masked_fill(~causal, -math.inf))


def _states_to_internal(
    states: torch.Tensor | None,
    batch: int,
    ngroups: int,
    d_state: int,
    k: int,
    headdim: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor | None:
    """(batch, nheads, headdim, d_state) -> (batch, ngroups, d_state, k, headdim), or None."""
    if states is None:
        return None
    grouped = states.to(dtype=dtype, device=device).view(batch, ngroups, k, headdim, d_state)
    return grouped.permute(0, 1, 4, 2, 3)


def _check_shapes(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    D: torch.Tensor | None,
    z: torch.Tensor | None,
    dt_bias: torch.Tensor | None,
    initial_states: torch.Tensor | None,
) -> None:
    """Raise ValueError naming the argument, its shape and the expected one."""
    if x.dim() != 4:
        raise ValueError(f"x must be (batch, seqlen, nheads, headdim), got shape {tuple(x.shape)}")
    batch, seqlen, nheads, headdim = x.shape
    if B.dim() != 4:
        raise ValueError(f"B must be (batch, seqlen, ngroups, d_state), got shape {tuple(B.shape)}")
    ngroups, d_state = B.shape[2], B.shape[3]
    if seqlen < 1:
        raise ValueError("seqlen must be at least 1, got 0")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if ngroups < 1 or nheads % ngroups:
        raise ValueError(f"ngroups must divide nheads, got ngroups={ngroups}, nheads={nheads}")
    expected = {
        "dt": (dt, (batch, seqlen, nheads)),
        "A": (A, (nheads,)),
        "B": (B, (batch, seqlen, ngroups, d_state)),
        "C": (C, (batch, seqlen, ngroups, d_state)),
        "z": (z, tuple(x.shape)),
        "dt_bias": (dt_bias, (nheads,)),
        "initial_states": (initial_states, (batch, nheads, headdim, d_state)),
    }
    for name, (tensor, shape) in expected.items():
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")
    if D is not None and tuple(D.shape) not in {(nheads,), (nheads, headdim)}:
        raise ValueError(f"D must have shape ({nheads},) or ({nheads}, {headdim}), got {tuple(D.shape)}")
