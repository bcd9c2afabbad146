"""causal_conv_silu against torch's grouped conv1d, values and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model.conv import causal_conv_silu


def reference(x, weight, bias):
    """silu(conv1d) in the channels-first layout, cut to the causal part. x: (b, l, ch)."""
    width = weight.shape[-1]
    out = F.conv1d(x.transpose(1, 2), weight, bias, padding=width - 1, groups=x.shape[-1])[..., : x.shape[1]]
    return F.silu(out.transpose(1, 2))


@pytest.mark.parametrize("seqlen", [1, 2, 17])
@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("with_bias", [True, False])
def test_causal_conv_silu_matches_grouped_conv1d(seqlen, width, with_bias):
    torch.manual_seed(0)
    wide = torch.randn(3, seqlen, 20, dtype=torch.float64, requires_grad=True)
    x = wide[..., 4:16]  # a strided slice, as split() hands it over from in_proj
    weight = torch.randn(12, 1, width, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(12, dtype=torch.float64, requires_grad=True) if with_bias else None
    leaves = [wide, weight] + ([bias] if with_bias else [])
    ours = causal_conv_silu(x, weight, bias)
    theirs = reference(x, weight, bias)
    assert ours.shape == (3, seqlen, 12)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(ours)
    expected = torch.autograd.grad(theirs, leaves, grad)
    for got, want in zip(torch.autograd.grad(ours, leaves, grad), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_causal_conv_silu_is_causal():
    x = torch.randn(2, 10, 6)
    weight, bias = torch.randn(6, 1, 4), torch.randn(6)
    before = causal_conv_silu(x, weight, bias)
    x[:, 7] += 1.0
    after = causal_conv_silu(x, weight, bias)
    torch.testing.assert_close(after[:, :7], before[:, :7], rtol=0, atol=0)


def test_causal_conv_silu_passes_gradcheck():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(3, 1, 4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(causal_conv_silu, (x, weight, bias))
