"""Causal depthwise conv1d + SiLU along time, in the time-major (batch, seqlen, channels) layout.

The layout in_proj produces: nothing is transposed, and the output is contiguous in the
layout the scan reads. The backward pass is written out (shifted multiply-adds) instead
of going through a generic grouped convolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_conv_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """silu(causal depthwise conv of x along time).

    x: (batch, seqlen, channels), any strides; weight: (channels, 1, width) as nn.Conv1d
    stores it; bias: (channels,) or None. Returns (batch, seqlen, channels) with
    out_t = silu(bias + sum_k weight[:, 0, k] * x_{t - width + 1 + k}), x_t = 0 for t < 0.
    """
    return _CausalConvSiLU.apply(x, weight, bias)


def _causal_conv(x: torch.Tensor, taps: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x: (batch, seqlen, channels); taps: (width, channels), the last tap on the current step."""
    width, seqlen = taps.shape[0], x.shape[1]
    out = x * taps[-1] if bias is None else torch.addcmul(bias, x, taps[-1])
    for shift in range(1, min(width, seqlen)):
        out[:, shift:].addcmul_(x[:, :-shift], taps[width - 1 - shift])
    return out


class _CausalConvSiLU(torch.autograd.Function):
    """x (batch, seqlen, channels), weight (channels, 1, width), bias (channels,) -> (batch, seqlen, channels)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        taps = weight.squeeze(1).t()  # (width, channels)
        pre = _causal_conv(x, taps, bias)  # (b, l, ch) before the activation
        ctx.save_for_backward(x, taps, pre)
        ctx.has_bias = bias is not None
        return F.silu(pre)

    @staticmethod
    def backward(ctx, grad):
        x, taps, pre = ctx.saved_tensors
        width, seqlen = taps.shape[0], x.shape[1]
        g = torch.ops.aten.silu_backward(grad, pre)  # (b, l, ch) gradient before the activation
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:  # x_s feeds out_{s + shift} through tap width-1-shift
            grad_x = g * taps[-1]
            for shift in range(1, min(width, seqlen)):
                grad_x[:, :-shift].addcmul_(g[:, shift:], taps[width - 1 - shift])
        if ctx.needs_input_grad[1]:
            grad_taps = torch.zeros_like(taps)
            for shift in range(min(width, seqlen)):
                grad_taps[width - 1 - shift] = (g[:, shift:] * x[:, : seqlen - shift]).sum((0, 1))
            grad_weight = grad_taps.t().unsqueeze(1)  # (channels, 1, width)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = g.sum((0, 1))
        return grad_x, grad_weight, grad_bias
