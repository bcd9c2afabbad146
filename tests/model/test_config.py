"""ModelConfig validation: each rule, with the value and the rule in the message."""

from __future__ import annotations

import math

import pytest

from model.config import ModelConfig


def test_model_config_defaults_suit_bar_data():
    config = ModelConfig()
    assert (config.d_model, config.n_layers, config.d_state, config.headdim, config.expand) == (128, 4, 64, 32, 2)
    assert (config.d_inner, config.nheads) == (256, 8)


def test_model_config_round_trips_through_plain_values():
    config = ModelConfig(n_features=5, dt_limit=(0.0, math.inf), A_init_range=(2.0, 4.0))
    assert ModelConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"headdim": 48}, r"headdim must divide expand\*d_model, got headdim=48, expand\*d_model=256"),
        ({"ngroups": 3}, r"ngroups must divide nheads = expand\*d_model/headdim, got ngroups=3, nheads=8"),
        ({"d_model": 0}, r"d_model must be a positive integer, got 0"),
        ({"n_layers": 2.5}, r"n_layers must be a positive integer, got 2.5"),
        ({"chunk_size": True}, r"chunk_size must be a positive integer, got True"),
        ({"d_conv": 5}, r"d_conv must be 2, 3 or 4 .* got 5"),
        ({"A_init_range": (0.0, 4.0)}, r"A_init_range must satisfy 0 < lo <= hi, got \(0.0, 4.0\)"),
        ({"dt_min": 0.2, "dt_max": 0.1}, r"dt_min and dt_max must satisfy 0 < dt_min <= dt_max, got 0.2, 0.1"),
        ({"dt_init_floor": 0.0}, r"dt_init_floor must be positive, got 0.0"),
        ({"dt_limit": (1.0, 0.5)}, r"dt_limit must satisfy 0 <= lo < hi, got \(1.0, 0.5\)"),
        ({"norm_eps": -1.0}, r"norm_eps must be positive, got -1.0"),
        ({"backend": "cuda"}, r"backend must be one of auto, torch, mamba_ssm, got 'cuda'"),
    ],
)
def test_model_config_rejects_invalid_values(values, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**values)


@pytest.mark.parametrize("backend", ["auto", "mamba_ssm"])  # the backends that may run the fused kernels
def test_model_config_refuses_conv_channels_the_fused_kernels_cannot_take(backend):
    # 2*36 + 2*1*18 = 108 channels: causal-conv1d and mamba-ssm's fused conv take multiples of 8 only
    with pytest.raises(ValueError, match=rf"conv channels expand\*d_model \+ 2\*ngroups\*d_state must be a multiple "
                                         rf"of 8 for the fused kernels \(backend {backend}\), got 2\*36 \+ 2\*1\*18 = "
                                         r"108; choose d_model and d_state .* or set model.backend=torch$"):
        ModelConfig(d_model=36, d_state=18, headdim=8, backend=backend)


def test_model_config_counts_each_group_of_b_and_c_in_the_conv_channels():
    assert ModelConfig(d_model=36, d_state=18, headdim=4, ngroups=2).conv_dim == 144  # 72 + 2*2*18: taken


def test_model_config_on_the_torch_backend_takes_any_conv_width():
    config = ModelConfig(d_model=36, d_state=18, headdim=8, backend="torch")
    assert config.conv_dim == 108 and config.conv_dim % 8


def test_model_config_from_dict_rejects_unknown_key_naming_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown model setting 'd_modle'; allowed: n_features, n_targets, d_model"):
        ModelConfig.from_dict({"d_modle": 64})


def test_model_config_is_frozen():
    with pytest.raises(AttributeError):
        ModelConfig().d_model = 64  # type: ignore[misc]


def test_model_config_from_saved_loads_a_width_the_fused_kernels_refuse_on_the_torch_path():
    """A checkpoint saved before the rule, with backend auto and conv channels 2*32 + 2*1*18 = 100, was trained on the
    torch path (the fused kernels cannot run it): it loads as backend torch; a fused-ready width keeps its backend."""
    with pytest.raises(ValueError, match="multiple of 8"):
        ModelConfig.from_dict({"d_model": 32, "d_state": 18, "headdim": 16})
    saved = ModelConfig.from_saved({"d_model": 32, "d_state": 18, "headdim": 16})
    assert (saved.backend, saved.conv_dim) == ("torch", 100)
    assert ModelConfig.from_saved({"d_model": 32, "d_state": 16, "headdim": 16, "backend": "auto"}).backend == "auto"
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_saved({"d_model": 32, "widht": 3})
