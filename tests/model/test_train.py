"""The training loop: AdamW groups, decoupled decay, schedule, E0, NaN stop, exact resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model import training as train_module
from model.checkpoint import load_checkpoint
from model.config import ModelConfig
from model.data import DataConfig, load_dataset
from model.forecaster import Forecaster
from model.schedule import lr_factor
from model.train import ResumeMismatch, TrainConfig, fit
from model.training import e0_train_sample, evaluate, weight_decay_groups
from tests.bars import write_bars

SMALL_MODEL = ModelConfig(d_model=32, n_layers=2, d_state=16, headdim=16, chunk_size=16)
FAST = TrainConfig(epochs=2, batch_size=64, lr=3e-3, weight_decay=0.01, warmup_fraction=0.1)


def test_weight_decay_groups_exempt_biases_norms_and_flagged_parameters():
    model = Forecaster(ModelConfig(n_features=8, d_model=32, n_layers=2, d_state=8, headdim=8))
    decay, no_decay = weight_decay_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert decayed == {"embed.weight", "head.weight"} | {
        f"layers.{i}.mixer.{n}" for i in range(2) for n in ("in_proj.weight", "conv1d.weight", "out_proj.weight")}
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_adamw_decay_is_decoupled_from_the_gradient():
    """A step with zero gradient shrinks decayed weights by exactly lr*wd, leaves the rest."""
    torch.manual_seed(0)
    model = Forecaster(ModelConfig(n_features=8, d_model=32, n_layers=1, d_state=8, headdim=8))
    lr, wd = 0.01, 0.1
    optimizer = torch.optim.AdamW(weight_decay_groups(model, wd), lr=lr)
    decay, no_decay = (group["params"] for group in optimizer.param_groups)
    before = [p.detach().clone() for p in decay + no_decay]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for p, old in zip(decay, before[: len(decay)], strict=True):
        torch.testing.assert_close(p.detach(), old * (1 - lr * wd), rtol=1e-6, atol=0)
    for p, old in zip(no_decay, before[len(decay):], strict=True):
        torch.testing.assert_close(p.detach(), old, rtol=0, atol=0)


def test_lr_factor_warms_up_linearly_then_follows_the_cosine():
    total, warmup, floor = 101, 10, 0.1
    assert lr_factor(0, total, warmup, floor) == pytest.approx(0.1)
    assert lr_factor(4, total, warmup, floor) == pytest.approx(0.5)
    assert lr_factor(9, total, warmup, floor) == pytest.approx(1.0)
    assert lr_factor(10, total, warmup, floor) == pytest.approx(1.0)
    middle = warmup + (total - warmup - 1) // 2
    assert lr_factor(middle, total, warmup, floor) == pytest.approx((1 + floor) / 2)
    assert lr_factor(total - 1, total, warmup, floor) == pytest.approx(floor)
    factors = [lr_factor(s, total, warmup, floor) for s in range(warmup, total)]
    assert all(a >= b for a, b in zip(factors, factors[1:], strict=False))


def test_lr_factor_of_a_fractional_step_stays_on_the_schedule():
    """A refit maps its steps onto its trial's (model/training.py): between two warmup steps the factor lies between
    theirs, never above the peak."""
    total, warmup, floor = 101, 10, 0.1
    torch.testing.assert_close(torch.tensor([lr_factor(s, total, warmup, floor) for s in (3.5, 9.5, 9.999)]),
                               torch.tensor([0.45, 1.0, 1.0]))


def test_training_schedule_of_a_refit_gives_its_trial_lr_at_every_epoch_end(small_data):
    """A refit (more training samples an epoch, so more steps) told its trial's sample count ends every epoch at
    the learning rate the trial had there: the same warmup and cosine over the same epochs."""
    from model.data import refit_dataset

    config = TrainConfig(epochs=5, batch_size=64, lr=3e-3, warmup_fraction=0.3)
    tiny = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=16, chunk_size=16)
    refit = refit_dataset(small_data)
    lrs = {}
    for name, data, samples in (("trial", small_data, None), ("refit", refit, len(small_data.train_index))):
        run = train_module.Training.start(config, tiny, data, None, schedule_samples=samples)
        steps = train_module.steps_per_epoch(len(data.train_index), config.batch_size, 1)
        ends = []
        for _ in range(config.epochs):
            for _ in range(steps):
                run.optimizer.step()  # no gradients: nothing moves but the schedule
                run.scheduler.step()
            ends.append(run.scheduler.get_last_lr()[0])
        lrs[name] = torch.tensor(ends, dtype=torch.float64)
    assert len(refit.train_index) > len(small_data.train_index) + 64  # more steps an epoch
    torch.testing.assert_close(lrs["refit"], lrs["trial"])
    assert lrs["trial"][-1].item() == pytest.approx(config.lr * config.min_lr_fraction)  # the cosine's floor at its end


def test_fit_stop_epoch_past_the_schedule_is_refused(small_data):
    with pytest.raises(ValueError, match=r"stop_epoch must be in 1\.\.2 \(the schedule's epochs\), got 3"):
        fit(FAST, SMALL_MODEL, small_data, stop_epoch=3)


def test_fit_evaluates_epoch_zero_before_any_step(small_data):
    reports = []
    fit(TrainConfig(epochs=1, batch_size=64), SMALL_MODEL, small_data, report=lambda m, c: reports.append(m))
    assert [m["epoch"] for m in reports] == [0, 1]
    torch.manual_seed(0)
    untrained = Forecaster(ModelConfig(**{**SMALL_MODEL.to_dict(), "n_features": small_data.n_features,
                                          "residual": small_data.residual, "A_init_range": (1.0, 16.0),
                                          "dt_limit": (0.0, math.inf)}))
    expected = evaluate(untrained, small_data, small_data.val_index, 64, torch.device("cpu"))
    assert reports[0]["val_loss"] == pytest.approx(expected, rel=1e-6)
    assert small_data.residual  # the default: the untrained model forecasts HAR exactly
    assert reports[0]["val_loss"] == pytest.approx(reports[0]["baseline_har"], rel=1e-5)
    sample = e0_train_sample(small_data.train_index, len(small_data.val_index))
    assert len(sample) == len(small_data.val_index) < len(small_data.train_index)  # not a whole pass
    modes = []
    untrained.register_forward_hook(lambda *_: modes.append(torch.is_inference_mode_enabled()))
    on_sample = evaluate(untrained, small_data, sample, 64, torch.device("cpu"))
    assert modes and all(modes)  # evaluation builds no autograd graph
    torch.testing.assert_close(reports[0]["train_loss"], on_sample, rtol=1e-6, atol=0.0)
    for key in ("train_loss", "val_loss", "best_val_loss", "best_epoch", "lr", "overfit_ratio", "improvement_over_e0",
                "samples_per_s", "epoch_s", "peak_memory_mb", "baseline_mean", "baseline_persistence"):
        assert key in reports[1], key
    assert reports[1]["overfit_ratio"] == pytest.approx(reports[1]["val_loss"] / reports[1]["train_loss"])


def test_e0_train_sample_spreads_at_most_n_training_samples_from_the_first_to_the_last():
    train_index = np.arange(16, 1016)  # 1,000 samples
    sample = e0_train_sample(train_index, 250)
    assert len(sample) == 250 and sample[0] == 16 and sample[-1] == 1015
    assert np.all(np.diff(sample) > 0) and np.isin(sample, train_index).all()  # distinct training samples, in order
    assert np.diff(sample).max() - np.diff(sample).min() <= 1  # evenly spaced
    assert np.array_equal(e0_train_sample(train_index[:100], 250), train_index[:100])  # fewer than n: all of them


def test_fit_stops_at_a_non_finite_loss_with_status_nan(small_data, tmp_path, monkeypatch):
    real_forward, calls = Forecaster.forward, {"n": 0}
    batches_per_epoch = math.ceil(len(small_data.train_index) / 64)
    eval_calls = math.ceil(len(small_data.train_index) / 64) + 2 * math.ceil(len(small_data.val_index) / 64)

    def forward(self, features):
        calls["n"] += 1
        out = real_forward(self, features)
        return out * math.nan if calls["n"] > eval_calls + batches_per_epoch + 3 else out  # 4th step of epoch 2

    monkeypatch.setattr(Forecaster, "forward", forward)
    reports = []
    result = fit(TrainConfig(epochs=4, batch_size=64), SMALL_MODEL, small_data, checkpoint_dir=tmp_path,
                 report=lambda m, c: reports.append(m))
    assert (result.status, result.stop_epoch) == ("nan", 2)
    assert [m["epoch"] for m in reports] == [0, 1]
    saved = load_checkpoint(tmp_path / "last.pt")
    assert saved["epoch"] == 1
    assert all(torch.isfinite(t).all() for t in saved["model"].values())


def test_fit_resumed_from_a_checkpoint_continues_exactly(small_data, tmp_path):
    config = TrainConfig(epochs=3, batch_size=64, lr=3e-3)
    straight = fit(config, SMALL_MODEL, small_data, checkpoint_dir=tmp_path / "straight")

    class Interrupted(Exception):
        pass

    def stop_after_first_epoch(metrics, checkpoint):
        if metrics["epoch"] == 1:
            raise Interrupted

    with pytest.raises(Interrupted):
        fit(config, SMALL_MODEL, small_data, checkpoint_dir=tmp_path / "resumed", report=stop_after_first_epoch)
    resumed = fit(config, SMALL_MODEL, small_data, checkpoint_dir=tmp_path / "resumed", resume=True)
    assert [m["epoch"] for m in resumed.history] == [0, 1, 2, 3]
    for a, b in zip(straight.history, resumed.history, strict=True):
        assert (a["train_loss"], a["val_loss"], a["lr"]) == (b["train_loss"], b["val_loss"], b["lr"])


def test_fit_resumes_a_checkpoint_saved_before_the_volatility_and_har_inputs(small_data, tmp_path):
    """An earlier version's last.pt has no residual setting and no input keys in its data identity: on the bar
    features alone (what it trained on) it resumes; a newer identity key it lacks is not a difference."""
    path = tmp_path / "bars.parquet"
    write_bars(path, 1500, seed=3)
    bars_only = load_dataset(path, DataConfig(window=32, horizon=6, vol_lookbacks=(), residual_to="none"))
    config = TrainConfig(epochs=2, batch_size=64)

    def stop_after_first_epoch(metrics, checkpoint):
        if metrics["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(config, SMALL_MODEL, bars_only, checkpoint_dir=tmp_path / "run", report=stop_after_first_epoch)
    saved = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    del saved["model_config"]["residual"]
    for key in ("vol_lookbacks", "residual_to", "har"):
        del saved["data"][key]
    torch.save(saved, tmp_path / "run" / "last.pt")
    resumed = fit(config, SMALL_MODEL, bars_only, checkpoint_dir=tmp_path / "run", resume=True)
    assert [m["epoch"] for m in resumed.history] == [0, 1, 2]
    with pytest.raises(ResumeMismatch, match="was trained with other"):  # the default inputs are other inputs
        fit(config, SMALL_MODEL, small_data, checkpoint_dir=tmp_path / "run", resume=True)


def test_fit_refuses_to_resume_with_another_model(small_data, tmp_path):
    fit(TrainConfig(epochs=1, batch_size=64), SMALL_MODEL, small_data, checkpoint_dir=tmp_path)
    other = ModelConfig(**{**SMALL_MODEL.to_dict(), "n_layers": 1, "A_init_range": (1.0, 16.0),
                           "dt_limit": (0.0, math.inf)})
    with pytest.raises(ValueError, match="was trained with other model configuration"):
        fit(TrainConfig(epochs=2, batch_size=64), other, small_data, checkpoint_dir=tmp_path, resume=True)


def test_fit_micro_batches_give_the_same_training(small_data):
    whole = fit(TrainConfig(epochs=1, batch_size=64, micro_batch_size=64), SMALL_MODEL, small_data)
    split = fit(TrainConfig(epochs=1, batch_size=64, micro_batch_size=16), SMALL_MODEL, small_data)
    torch.testing.assert_close(torch.tensor(split.history[-1]["val_loss"]),
                               torch.tensor(whole.history[-1]["val_loss"]), rtol=1e-4, atol=0)


def test_fit_is_deterministic_on_cpu(small_data):
    first = fit(FAST, SMALL_MODEL, small_data)
    second = fit(FAST, SMALL_MODEL, small_data)
    assert [m["val_loss"] for m in first.history] == [m["val_loss"] for m in second.history]


def test_fit_short_run_on_synthetic_bars_beats_persistence(tmp_path):
    path = tmp_path / "bars.parquet"
    write_bars(path, 8000, seed=0)
    data = load_dataset(path, DataConfig(window=64, horizon=12))
    result = fit(TrainConfig(epochs=3, batch_size=128, lr=3e-3, weight_decay=0.01), SMALL_MODEL, data)
    assert result.status == "completed"
    assert result.best_epoch > 0
    assert result.best_val_loss < data.baselines["persistence"] < data.baselines["mean"]


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"epochs": 0}, r"epochs must be a positive integer, got 0"),
        ({"lr": -1.0}, r"lr must be in \(0, 1\), got -1.0"),
        ({"weight_decay": 1.5}, r"weight_decay must be in \[0, 1\), got 1.5"),
        ({"batch_size": 2.5}, r"batch_size must be a positive integer, got 2.5"),
        ({"warmup_fraction": 1.0}, r"warmup_fraction must be in \[0, 1\), got 1.0"),
        ({"device": "tpu"}, r"device must be one of auto, cpu, cuda, got 'tpu'"),
        ({"betas": (0.9, 1.0)}, r"betas must be two numbers in \[0, 1\)"),
        ({"eps": math.nan}, r"eps must be a positive number, got nan"),
        ({"grad_clip": math.nan}, r"grad_clip must be a number >= 0"),
        ({"lr": math.nan}, r"lr must be in \(0, 1\), got nan"),
        ({"seed": "abc"}, r"seed must be an integer, got 'abc'"),
    ],
)
def test_train_config_rejects_invalid_values(values, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**values)


def test_train_config_from_dict_rejects_unknown_key():
    with pytest.raises(ValueError, match=r"unknown train setting 'learning_rate'; allowed: epochs, batch_size, lr"):
        TrainConfig.from_dict({"learning_rate": 0.1})


def test_resolve_device_refuses_cuda_without_a_gpu():
    if torch.cuda.is_available():
        assert train_module.resolve_device("cuda").type == "cuda"
    else:
        with pytest.raises(ValueError, match="no CUDA GPU is available"):
            train_module.resolve_device("cuda")


def test_fit_stops_at_a_non_finite_gradient(small_data, tmp_path, monkeypatch):
    real_clip, calls = train_module.nn.utils.clip_grad_norm_, {"n": 0}

    def clip(parameters, max_norm):
        calls["n"] += 1
        norm = real_clip(parameters, max_norm)
        return norm * math.inf if calls["n"] == 2 else norm

    monkeypatch.setattr(train_module.nn.utils, "clip_grad_norm_", clip)
    result = fit(TrainConfig(epochs=2, batch_size=64), SMALL_MODEL, small_data, checkpoint_dir=tmp_path)
    assert (result.status, result.stop_epoch) == ("nan", 1)
    assert load_checkpoint(tmp_path / "last.pt")["epoch"] == 0  # nothing from the diverged epoch


def test_fit_stops_at_a_non_finite_validation_loss(small_data, monkeypatch):
    real_evaluate, calls = train_module.evaluate, {"n": 0}

    def evaluate_then_nan(*args):
        calls["n"] += 1
        return math.nan if calls["n"] == 4 else real_evaluate(*args)  # E0 train, E0 val, epoch 1, epoch 2

    monkeypatch.setattr(train_module, "evaluate", evaluate_then_nan)
    result = fit(TrainConfig(epochs=3, batch_size=64), SMALL_MODEL, small_data)
    assert (result.status, result.stop_epoch) == ("nan", 2)
    assert [m["epoch"] for m in result.history] == [0, 1]


def test_fit_best_checkpoint_holds_the_best_epoch(small_data, tmp_path):
    result = fit(TrainConfig(epochs=3, batch_size=64, lr=3e-3), SMALL_MODEL, small_data, checkpoint_dir=tmp_path)
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == result.best_epoch
    model = Forecaster(ModelConfig.from_dict(best["model_config"]))
    model.load_state_dict(best["model"])
    loss = evaluate(model, small_data, small_data.val_index, 64, torch.device("cpu"))
    assert loss == pytest.approx(result.best_val_loss, rel=1e-5)


def test_fit_refuses_to_resume_on_other_data(small_data, tmp_path):
    fit(TrainConfig(epochs=1, batch_size=64), SMALL_MODEL, small_data, checkpoint_dir=tmp_path)
    path = tmp_path / "other.parquet"
    write_bars(path, 1500, seed=9)
    other = load_dataset(path, DataConfig(window=32, horizon=6))
    with pytest.raises(ResumeMismatch, match="was trained with other data"):
        fit(TrainConfig(epochs=1, batch_size=64), SMALL_MODEL, other, checkpoint_dir=tmp_path, resume=True)


def test_fit_refuses_to_resume_with_other_training_settings(small_data, tmp_path):
    fit(TrainConfig(epochs=1, batch_size=64), SMALL_MODEL, small_data, checkpoint_dir=tmp_path)
    with pytest.raises(ResumeMismatch, match="was trained with other training configuration"):
        fit(TrainConfig(epochs=1, batch_size=32), SMALL_MODEL, small_data, checkpoint_dir=tmp_path, resume=True)


def test_fit_predicts_one_target_whatever_the_config_says(small_data):
    result = fit(TrainConfig(epochs=1, batch_size=64), ModelConfig(**{**SMALL_MODEL.__dict__, "n_targets": 3}),
                 small_data)
    assert result.status == "completed"
