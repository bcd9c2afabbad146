"""The Forecaster stack: shapes, gradients, causality, mamba_ssm-style layer names."""

from __future__ import annotations

import pytest
import torch

from model.forecaster import Forecaster, ModelConfig

SMALL = ModelConfig(n_features=5, n_targets=2, d_model=32, n_layers=2, d_state=8, headdim=8, chunk_size=8)


def test_forecaster_maps_windows_to_targets():
    model = Forecaster(SMALL)
    assert model(torch.randn(3, 21, 5)).shape == (3, 2)


def test_forecaster_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = Forecaster(SMALL)
    model(torch.randn(4, 19, 5)).square().mean().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_forecaster_prediction_ignores_bars_after_the_window():
    """Prediction of a prefix equals the prediction of the prefix inside a longer window's
    first positions: the stack is causal, no later bar leaks into an earlier output."""
    torch.manual_seed(0)
    model = Forecaster(SMALL).double()
    bars = torch.randn(2, 30, 5, dtype=torch.float64)
    hidden = model.embed(bars)
    for layer in model.layers:
        hidden = layer(hidden)
    at_12 = model.head(model.norm_f(hidden[:, 12]))
    torch.testing.assert_close(model(bars[:, :13]), at_12, rtol=1e-9, atol=1e-12)


def test_forecaster_uses_mamba_ssm_layer_names():
    names = set(Forecaster(SMALL).state_dict())
    assert {"layers.0.norm.weight", "layers.0.mixer.in_proj.weight", "layers.1.mixer.A_log", "norm_f.weight"} <= names


def test_forecaster_scales_residual_outputs_by_depth():
    torch.manual_seed(0)
    deep = Forecaster(ModelConfig(n_features=5, d_model=64, n_layers=16, d_state=8, headdim=16))
    std = torch.stack([layer.mixer.out_proj.weight.std() for layer in deep.layers]).mean()
    fan_in_std = 1 / (3 * 128) ** 0.5  # kaiming-uniform std of nn.Linear(128, 64)
    torch.testing.assert_close(std, torch.tensor(fan_in_std / 4), rtol=0.05, atol=0)


def test_residual_forecaster_starts_at_the_baseline_and_learns_a_correction():
    """residual: the last feature of the last bar is the baseline's forecast; the untrained model returns it exactly."""
    torch.manual_seed(0)
    model = Forecaster(ModelConfig(**{**SMALL.to_dict(), "n_targets": 1, "residual": True}))
    features = torch.randn(4, 19, 5)
    torch.testing.assert_close(model(features), features[:, -1, -1:], rtol=0, atol=0)
    model(features).sub(torch.randn(4, 1)).square().mean().backward()
    assert model.head.weight.grad.abs().sum() > 0  # the zero head learns at once, and the rest through it


def test_residual_needs_a_single_target():
    with pytest.raises(ValueError, match=r"residual \(a correction to one baseline's forecast\) needs n_targets 1, "
                                         r"got 2"):
        ModelConfig(**{**SMALL.to_dict(), "residual": True})
