"""bf16 training: autocast around float32 parameters, optimizer state and SSM state (CPU autocast here)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from model.config import ModelConfig
from model.forecaster import Forecaster
from model.mamba2 import Mamba2
from model.precision import autocast
from model.ssd import ssd_final_state, ssd_scan
from model.train import TrainConfig, fit
from tests.model.test_ssd import make_inputs

CPU = torch.device("cpu")
BF16 = {"rtol": 3e-2, "atol": 3e-2}  # bfloat16 keeps 8 bits of mantissa


def test_the_scan_and_its_state_stay_float32_under_bf16_autocast():
    inputs = {k: v.to(torch.bfloat16) for k, v in make_inputs(70, dtype=torch.float32).items()}
    y_plain, state_plain = ssd_scan(**inputs, chunk_size=16, return_final_states=True)
    with autocast("bf16", CPU):
        y, state = ssd_scan(**inputs, chunk_size=16, return_final_states=True)
        final = ssd_final_state(inputs["x"], inputs["dt"], inputs["A"], inputs["B"], chunk_size=16)
    assert state.dtype == final.dtype == torch.float32 and y.dtype == torch.bfloat16
    torch.testing.assert_close(state, state_plain, rtol=0, atol=0)  # autocast changed nothing inside
    torch.testing.assert_close(y, y_plain, rtol=0, atol=0)
    torch.testing.assert_close(final, state_plain, rtol=1e-5, atol=1e-5)


def test_a_bf16_autocast_step_keeps_parameters_and_gradients_float32_close_to_fp32():
    torch.manual_seed(0)
    model = Forecaster(ModelConfig(n_features=8, d_model=32, n_layers=2, d_state=16, headdim=16, chunk_size=16))
    inputs = torch.randn(4, 40, 8)  # (batch, window, features)
    expected = model(inputs)
    with autocast("bf16", CPU):
        out = model(inputs)
    assert out.dtype == torch.bfloat16 and expected.dtype == torch.float32
    torch.testing.assert_close(out.float(), expected, **BF16)
    out.float().square().mean().backward()
    assert all(p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
               for p in model.parameters())


def test_the_residual_stream_stays_float32_under_bf16_autocast():
    model = Forecaster(ModelConfig(n_features=8, d_model=32, n_layers=2, d_state=16, headdim=16, chunk_size=16))
    seen = []
    for layer in model.layers:  # what each block adds its mixer's output to
        layer.norm.register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    with autocast("bf16", CPU):
        model(torch.randn(2, 40, 8))
    assert seen == [torch.float32, torch.float32]


def test_forward_last_under_bf16_autocast_is_the_last_step_of_forward():
    torch.manual_seed(0)
    layer = Mamba2(d_model=32, d_state=16, headdim=8, chunk_size=16)
    u = torch.randn(3, 50, 32)
    with autocast("bf16", CPU):
        whole, last = layer(u)[:, -1], layer.forward_last(u)
    torch.testing.assert_close(last.float(), whole.float(), **BF16)


def test_fit_in_bf16_learns_like_fp32_and_saves_float32_weights(small_data, tmp_path):
    config = TrainConfig(epochs=2, batch_size=64, lr=3e-3, weight_decay=0.01, warmup_fraction=0.1, device="cpu")
    model = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)
    fp32 = fit(config, model, small_data)
    bf16 = fit(dataclasses.replace(config, precision="bf16"), model, small_data, checkpoint_dir=tmp_path)
    assert bf16.status == "completed" and all(math.isfinite(m["val_loss"]) for m in bf16.history)
    assert bf16.history[-1]["val_loss"] < bf16.history[0]["val_loss"]  # it learned
    torch.testing.assert_close(bf16.history[-1]["val_loss"], fp32.history[-1]["val_loss"], rtol=0.1, atol=0)
    saved = torch.load(tmp_path / "last.pt", weights_only=True)
    assert saved["train_config"]["precision"] == "bf16"
    assert all(v.dtype == torch.float32 for v in saved["model"].values() if v.is_floating_point())


@pytest.mark.parametrize("bad", ["fp16", "BF16", None])
def test_precision_is_fp32_or_bf16(bad):
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        TrainConfig(precision=bad)


def test_a_checkpoint_saved_before_precision_existed_resumes(small_data, tmp_path):
    config = TrainConfig(epochs=2, batch_size=64, device="cpu")
    model = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)
    fit(dataclasses.replace(config, epochs=1), model, small_data, checkpoint_dir=tmp_path)
    saved = torch.load(tmp_path / "last.pt", weights_only=True)
    del saved["train_config"]["precision"]  # as written by earlier versions
    saved["train_config"]["epochs"] = 2  # the run is continued to 2 epochs
    torch.save(saved, tmp_path / "last.pt")
    resumed = fit(config, model, small_data, checkpoint_dir=tmp_path, resume=True)
    assert [m["epoch"] for m in resumed.history] == [0, 1, 2]
