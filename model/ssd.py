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
from typing import NamedTuple

import torch
import torch.nn.functional as F

from model.precision import in_full_precision

__all__ = ["ssd_final_state", "ssd_scan"]


@in_full_precision  # under bf16 autocast the scan and its state stay float32 (model/precision.py)
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

    Computed in x's dtype, or float32 for half-precision inputs (as the kernel does), with
    autocast off.
    """
    _check_shapes(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states)
    seqlen = x.shape[1]
    chunks = _to_chunks(x, dt, A, B, C, chunk_size, dt_bias, dt_softplus, dt_limit)
    y = _diagonal_blocks(chunks)  # (b, c, q, g, k, p)
    entering, state = _pass_states(chunks, initial_states)
    first = 0 if entering[0] is not None else 1  # without initial states chunk 0 starts from zero
    if first < len(entering):
        y[:, first:] += _off_diagonal_blocks(chunks, torch.stack(entering[first:], dim=1), first)

    # Skip connection and gate; drop the padding.
    batch, _, nheads, headdim = x.shape
    y = y.reshape(batch, -1, nheads, headdim)[:, :seqlen]  # (b, l, h, p)
    work = chunks.x.dtype
    if D is not None:
        y = y + chunks.x[:, :seqlen] * (D.to(work) if D.dim() == 2 else D.to(work).unsqueeze(-1))
    if z is not None:
        y = y * F.silu(z.to(work))
    y = y.to(x.dtype)
    if not return_final_states:
        return y
    return y, _states_to_external(state)


@in_full_precision
def ssd_final_state(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    chunk_size: int,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    initial_states: torch.Tensor | None = None,
) -> torch.Tensor:
    """Only the state after the last step, without computing y: ssd_scan's final_states.

    x: (batch, seqlen, nheads, headdim); dt: (batch, seqlen, nheads); A: (nheads,);
    B: (batch, seqlen, ngroups, d_state). Returns (batch, nheads, headdim, d_state).
    The output at the last step is then final_states @ C_last (+ D x_last).
    """
    _check_shapes(x, dt, A, B, B, chunk_size, None, None, dt_bias, initial_states)  # no C here: B stands in
    chunks = _to_chunks(x, dt, A, B, None, chunk_size, dt_bias, dt_softplus, dt_limit)
    return _states_to_external(_pass_states(chunks, initial_states)[1])


class _Chunks(NamedTuple):
    """The scan's inputs discretised, padded and cut into chunks of q steps."""

    x: torch.Tensor  # (b, l_padded, h, p) inputs in the computation dtype
    x_dt: torch.Tensor  # (b, c, q, g, k*p) inputs times dt
    B: torch.Tensor  # (b, c, g, q, n)
    C: torch.Tensor | None  # (b, c, g, q, n)
    dA_cs: torch.Tensor  # (b, c, g, k, q) cumulative log-decay inside each chunk


def _to_chunks(x, dt, A, B, C, chunk_size, dt_bias, dt_softplus, dt_limit) -> _Chunks:
    """Discretise dt, pad to whole chunks (padded steps: dt = 0, no decay, no input), reshape.

    x (b, l, h, p); dt (b, l, h); A (h,); B, C (b, l, g, n) or C None; dt_bias (h,) or None.
    """
    batch, seqlen, nheads, headdim = x.shape
    ngroups, d_state = B.shape[2], B.shape[3]
    k = nheads // ngroups
    work = torch.promote_types(x.dtype, torch.float32)

    # 1. Discretise: dt (b, l, h); per-step log-decay dA = dt * A.
    dt = dt.to(work)
    if dt_bias is not None:
        dt = dt + dt_bias.to(work)
    if dt_softplus:
        dt = F.softplus(dt)  # threshold 20, as the kernel
    dt = dt.clamp(dt_limit[0], dt_limit[1])

    # 2. Pad to whole chunks.
    pad = -seqlen % chunk_size
    nchunks, q = (seqlen + pad) // chunk_size, chunk_size
    xw, Bw = x.to(work), B.to(work)
    Cw = None if C is None else C.to(work)
    if pad:
        xw = F.pad(xw, (0, 0, 0, 0, 0, pad))
        Bw = F.pad(Bw, (0, 0, 0, 0, 0, pad))
        Cw = None if Cw is None else F.pad(Cw, (0, 0, 0, 0, 0, pad))
        dt = F.pad(dt, (0, 0, 0, pad))

    # 3. Chunked views and the cumulative log-decay inside each chunk.
    x_dt = (xw * dt.unsqueeze(-1)).view(batch, nchunks, q, ngroups, k * headdim)  # (b, c, q, g, k*p)
    Bc = Bw.view(batch, nchunks, q, ngroups, d_state).transpose(2, 3)  # (b, c, g, q, n)
    Cc = None if Cw is None else Cw.view(batch, nchunks, q, ngroups, d_state).transpose(2, 3)  # (b, c, g, q, n)
    dA = (dt * A.to(work)).view(batch, nchunks, q, ngroups, k)  # (b, c, q, g, k)
    dA_cs = dA.permute(0, 1, 3, 4, 2).cumsum(-1)  # (b, c, g, k, q)
    return _Chunks(xw, x_dt, Bc, Cc, dA_cs)


def _diagonal_blocks(chunks: _Chunks) -> torch.Tensor:
    """Within each chunk: y[i] = sum_{j<=i} (C_i . B_j) exp(cs_i - cs_j) dt_j x_j.

    Returns (b, c, q, g, k, p).
    """
    batch, nchunks, q, ngroups, _ = chunks.x_dt.shape
    k = chunks.dA_cs.shape[3]
    CB = chunks.C @ chunks.B.transpose(-1, -2)  # (b, c, g, q_i, q_j), shared by the group's heads
    scores = _segment_decay(chunks.dA_cs) * CB.unsqueeze(3)  # (b, c, g, k, q_i, q_j)
    x_heads = chunks.x_dt.view(batch, nchunks, q, ngroups, k, -1).permute(0, 1, 3, 4, 2, 5)  # (b, c, g, k, q, p)
    return (scores @ x_heads).permute(0, 1, 4, 2, 3, 5)  # (b, c, q, g, k, p)


def _pass_states(chunks: _Chunks, initial_states: torch.Tensor | None):
    """The state entering each chunk (None for the first one without initial states: zero)
    and the state after the last one.

    Each chunk adds B^T (x dt exp(cs_end - cs)) to the state it received, decayed by
    exp(cs_end). States are (b, g, n, k, p); one short loop over chunks, not over steps.
    """
    batch, nchunks, q, ngroups, kp = chunks.x_dt.shape
    k, d_state = chunks.dA_cs.shape[3], chunks.B.shape[-1]
    to_end = torch.exp(chunks.dA_cs[..., -1:] - chunks.dA_cs)  # (b, c, g, k, q)
    x_to_end = chunks.x_dt.view(batch, nchunks, q, ngroups, k, -1) * to_end.permute(0, 1, 4, 2, 3).unsqueeze(-1)
    added = chunks.B.transpose(-1, -2) @ x_to_end.view(batch, nchunks, q, ngroups, kp).transpose(2, 3)
    # added: (b, c, g, n, k*p)
    chunk_decay = torch.exp(chunks.dA_cs[..., -1])  # (b, c, g, k)
    state = None
    if initial_states is not None:  # (b, h, p, n) -> (b, g, n, k, p)
        state = initial_states.to(chunks.x.dtype).view(batch, ngroups, k, -1, d_state).permute(0, 1, 4, 2, 3)
    entering = []
    for step, decay in zip(added.unbind(1), chunk_decay.unbind(1), strict=True):  # unbind: no zero-filled grads
        entering.append(state)
        step = step.view(batch, ngroups, d_state, k, -1)
        state = step if state is None else state * decay[:, :, None, :, None] + step
    return entering, state


def _off_diagonal_blocks(chunks: _Chunks, start: torch.Tensor, first: int) -> torch.Tensor:
    """From earlier chunks: y[i] = exp(cs_i) C_i . (state entering the chunk), for chunks first...

    start: (b, c - first, g, n, k, p) the states entering those chunks.
    Returns (b, c - first, q, g, k, p).
    """
    batch, nchunks, ngroups, d_state, k, headdim = start.shape
    q = chunks.x_dt.shape[2]
    C = chunks.C[:, first:]  # (b, c', g, q, n)
    y_off = (C @ start.view(batch, nchunks, ngroups, d_state, k * headdim)).view(batch, nchunks, ngroups, q, k, -1)
    from_start = torch.exp(chunks.dA_cs[:, first:]).permute(0, 1, 2, 4, 3).unsqueeze(-1)  # (b, c', g, q, k, 1)
    return (y_off * from_start).transpose(2, 3)  # (b, c', q, g, k, p)


def _states_to_external(state: torch.Tensor) -> torch.Tensor:
    """(b, g, n, k, p) -> (batch, nheads, headdim, d_state)."""
    batch, ngroups, d_state, k, headdim = state.shape
    return state.permute(0, 1, 3, 4, 2).reshape(batch, ngroups * k, headdim, d_state)


def _segment_decay(dA_cs: torch.Tensor) -> torch.Tensor:
    """exp(cs_i - cs_j) for j <= i, else 0.

    dA_cs: (..., q) cumulative log-decay. Returns (..., q, q). The upper triangle is
    masked before the exp, so no inf (and no NaN gradient) is ever formed.
    """
    q = dA_cs.shape[-1]
    diff = dA_cs.unsqueeze(-1) - dA_cs.unsqueeze(-2)  # (..., q_i, q_j)
    causal = torch.ones(q, q, dtype=torch.bool, device=dA_cs.device).tril()
    return torch.exp(diff.masked_fill(~causal, -math.inf))


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
