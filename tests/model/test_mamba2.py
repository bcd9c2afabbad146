"""The Mamba2 block: mamba_ssm's parameters, initialisation and numerics."""

from __future__ import annotations

import math

import pytest
import torch

from model.mamba2 import Mamba2

CONFIGS = [
    {"d_model": 64, "d_state": 16, "headdim": 16},
    {"d_model": 32, "d_state": 8, "headdim": 8, "ngroups": 2, "D_has_hdim": True, "bias": True},
    {"d_model": 48, "d_state": 32, "headdim": 24, "expand": 1, "conv_bias": False, "d_conv": 3, "rmsnorm": False},
]


def mamba_ssm_shapes(d_model, d_state=128, d_conv=4, expand=2, headdim=64, ngroups=1, D_has_hdim=False,
                     rmsnorm=True, bias=False, conv_bias=True, **_):
    """state_dict shapes by mamba_ssm.modules.mamba2.Mamba2's constructor rules."""
    d_inner = expand * d_model
    nheads = d_inner // headdim
    conv_dim = d_inner + 2 * ngroups * d_state
    shapes = {
        "in_proj.weight": (2 * d_inner + 2 * ngroups * d_state + nheads, d_model),
        "conv1d.weight": (conv_dim, 1, d_conv),
        "dt_bias": (nheads,),
        "A_log": (nheads,),
        "D": (d_inner,) if D_has_hdim else (nheads,),
        "out_proj.weight": (d_model, d_inner),
    }
    if bias:
        shapes["in_proj.bias"] = (2 * d_inner + 2 * ngroups * d_state + nheads,)
        shapes["out_proj.bias"] = (d_model,)
    if conv_bias:
        shapes["conv1d.bias"] = (conv_dim,)
    if rmsnorm:
        shapes["norm.weight"] = (d_inner,)
    return shapes


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_mamba2_state_dict_has_mamba_ssm_names_and_shapes(kwargs):
    block = Mamba2(**kwargs)
    got = {name: tuple(t.shape) for name, t in block.state_dict().items()}
    assert got == mamba_ssm_shapes(**kwargs)


def test_mamba2_flags_a_log_d_and_dt_bias_for_no_weight_decay():
    block = Mamba2(d_model=32, d_state=8, headdim=8)
    flagged = {name for name, p in block.named_parameters() if getattr(p, "_no_weight_decay", False)}
    assert flagged == {"A_log", "D", "dt_bias"}


def test_mamba2_initialises_like_mamba_ssm():
    torch.manual_seed(0)
    block = Mamba2(d_model=256, d_state=16, headdim=4, dt_min=0.002, dt_max=0.05, A_init_range=(2, 8))
    A = torch.exp(block.A_log)
    dt = torch.nn.functional.softplus(block.dt_bias)
    assert block.nheads == 128
    assert bool(((A >= 2) & (A <= 8)).all())
    assert bool(((dt >= 0.002 * (1 - 1e-5)) & (dt <= 0.05 * (1 + 1e-5))).all())
    # log-uniform: the median of log dt sits mid-way between log dt_min and log dt_max
    assert abs(dt.log().median().item() - (math.log(0.002) + math.log(0.05)) / 2) < 0.4
    torch.testing.assert_close(block.D.detach(), torch.ones(128))
    torch.testing.assert_close(block.norm.weight.detach(), torch.ones(512))


def test_mamba2_dt_init_floor_applies():
    block = Mamba2(d_model=64, d_state=8, headdim=8, dt_min=1e-6, dt_max=1e-5, dt_init_floor=1e-3)
    torch.testing.assert_close(torch.nn.functional.softplus(block.dt_bias.detach()), torch.full((16,), 1e-3))


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_mamba2_gradients_reach_every_parameter(kwargs):
    torch.manual_seed(0)
    block = Mamba2(**kwargs, chunk_size=8)
    block(torch.randn(2, 19, kwargs["d_model"])).square().mean().backward()
    for name, param in block.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_mamba2_is_causal():
    torch.manual_seed(0)
    block = Mamba2(d_model=32, d_state=8, headdim=8, chunk_size=8)
    u = torch.randn(2, 30, 32)
    before = block(u)
    changed = u.clone()
    changed[:, 17] += 1.0
    after = block(changed)
    torch.testing.assert_close(after[:, :17], before[:, :17], rtol=0, atol=0)
    assert not torch.allclose(after[:, 17], before[:, 17])


def test_mamba2_output_is_independent_of_chunk_size():
    torch.manual_seed(0)
    block = Mamba2(d_model=32, d_state=8, headdim=8, chunk_size=64).double()
    u = torch.randn(2, 45, 32, dtype=torch.float64)
    reference = block(u)
    for chunk_size in (4, 16, 45):
        block.chunk_size = chunk_size
        torch.testing.assert_close(block(u), reference, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("ngroups", [1, 2])
def test_mamba2_state_dict_round_trips_with_transformers_mamba2(ngroups):
    """An independent implementation (transformers' Mamba2Mixer, torch path) loads our
    state_dict, computes the same outputs, and gives its weights back to us."""
    import transformers  # a dev dependency, installed by `make test`
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(0)
    ours = Mamba2(d_model=64, d_state=16, headdim=16, ngroups=ngroups, chunk_size=16)
    config = transformers.Mamba2Config(hidden_size=64, state_size=16, head_dim=16, expand=2, num_heads=8,
                                       n_groups=ngroups, chunk_size=16, num_hidden_layers=1, layer_norm_epsilon=1e-5)
    theirs = Mamba2Mixer(config, layer_idx=0)
    theirs.load_state_dict(ours.state_dict())
    u = torch.randn(2, 40, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours(u), theirs(u), rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(0.01 * torch.randn_like(p))
    back = Mamba2(d_model=64, d_state=16, headdim=16, ngroups=ngroups, chunk_size=16)
    back.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(back(u), theirs(u), rtol=1e-4, atol=1e-5)


def test_mamba2_without_rmsnorm_gates_inside_the_scan():
    torch.manual_seed(0)
    block = Mamba2(d_model=32, d_state=8, headdim=8, rmsnorm=False, chunk_size=8).double()
    u = torch.randn(1, 12, 32, dtype=torch.float64)
    z = block.in_proj(u)[..., : block.d_inner]
    block.out_proj = torch.nn.Identity()
    gated = block(u)
    block.in_proj.weight.data[: block.d_inner] = 0  # z = 0 -> silu(z) = 0
    torch.testing.assert_close(block(u), torch.zeros_like(gated))
    assert not torch.allclose(z, torch.zeros_like(z))


def test_mamba2_rejects_headdim_that_does_not_divide_inner_width():
    with pytest.raises(ValueError, match=r"headdim must divide expand\*d_model, got headdim=48, expand\*d_model=128"):
        Mamba2(d_model=64, headdim=48)


def test_mamba2_rejects_ngroups_that_does_not_divide_nheads():
    with pytest.raises(ValueError, match=r"ngroups must divide nheads, got ngroups=3, nheads=8"):
        Mamba2(d_model=64, headdim=16, ngroups=3)


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("seqlen", [1, 21])
def test_mamba2_forward_last_equals_last_position_of_forward(kwargs, seqlen):
    torch.manual_seed(0)
    block = Mamba2(**kwargs, chunk_size=8).double()
    u = torch.randn(3, seqlen, kwargs["d_model"], dtype=torch.float64, requires_grad=True)
    last = block.forward_last(u)
    torch.testing.assert_close(last, block(u)[:, -1], rtol=1e-9, atol=1e-12)
    grads = torch.autograd.grad(last.sum(), [u, *block.parameters()])
    expected = torch.autograd.grad(block(u)[:, -1].sum(), [u, *block.parameters()])
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
