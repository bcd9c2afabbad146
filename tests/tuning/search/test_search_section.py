"""Searching any setting by its dotted name (tuning/search/searchable.py, search_section.py): kinds of entry,
the recipe's own checks at load time, and what a trial's parameters set."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tuning.search.gate import GateConfig, stop_reason
from tuning.search.largest import largest_params
from tuning.search.param_text import other_params_text
from tuning.search.searchable import ALIASES, resolve, searchable_settings
from tuning.search.searcher import optuna_space
from tuning.search.space import Choice, FloatRange, IntRange, parse_space, searched, searches_data, with_params
from tuning.sweep.trainable import invalid_result
from tuning.yaml_io import ConfigError

BASE = {"scheduler": {"max_epochs": 4, "grace_period": 1}, "gate": {"epoch": 2, "ratio_to_e0": 0.9}}


def space_of(search, **top):
    return parse_space({**BASE, "search": search, **top}, "s.yaml")


def test_every_kind_of_entry_parses_to_its_range_or_choices_and_optuna_distribution():
    space = space_of({"learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
                      "data.window": {"low": 32, "high": 256, "step": 32},
                      "model.n_layers": {"low": 1, "high": 8, "log": True},
                      "train.warmup_fraction": {"low": 0.0, "high": 0.2, "step": 0.05},
                      "model.d_model": {"choices": [64, 128]}, "train.precision": {"choices": ["fp32", "bf16"]}})
    assert space.search["data.window"] == IntRange(32, 256, 32)
    assert space.search["model.n_layers"] == IntRange(1, 8, 1, log=True)
    assert space.search["train.warmup_fraction"] == FloatRange(0.0, 0.2, step=0.05)
    assert space.search["train.precision"] == Choice(("fp32", "bf16"))
    distributions = optuna_space(space)
    assert distributions["data.window"] == IntDistribution(32, 256, step=32)
    assert distributions["model.n_layers"] == IntDistribution(1, 8, log=True)
    assert distributions["train.warmup_fraction"] == FloatDistribution(0.0, 0.2, step=0.05)
    assert distributions["learning_rate"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert distributions["model.d_model"] == CategoricalDistribution((64, 128))


def test_a_trials_parameters_set_each_setting_by_its_short_or_dotted_name():
    space = space_of({"learning_rate": {"low": 1e-4, "high": 1e-2}, "model.d_model": {"choices": [64, 128]},
                      "data.window": {"choices": [32, 64]}, "train.precision": {"choices": ["fp32", "bf16"]}})
    params = {"learning_rate": 2e-3, "model.d_model": 128, "data.window": 64, "train.precision": "bf16",
              "seed": 3, "fold": 2}
    run = with_params(space.run, params)
    assert (run.train.lr, run.model.d_model, run.data.window, run.train.precision) == (2e-3, 128, 64, "bf16")
    assert (run.train.seed, run.data.fold) == (3, 2)
    assert searched(params) == {k: v for k, v in params.items() if k not in ("seed", "fold")}
    assert searches_data(space) and not searches_data(space_of({"model.d_model": {"choices": [64, 128]}}))


def test_a_space_with_some_refused_combinations_loads_and_a_refused_one_is_a_config_error_at_its_trial():
    # headdim 64 divides d_model 32's inner width (64), not d_model 48's (96): the combination (48, 64) is refused
    space = space_of({"model.d_model": {"choices": [32, 48]}, "model.headdim": {"choices": [16, 64]}})
    with_params(space.run, {"model.d_model": 32, "model.headdim": 64})
    with pytest.raises(ConfigError, match="headdim must divide expand\\*d_model"):
        with_params(space.run, {"model.d_model": 48, "model.headdim": 64})


def test_an_invalid_trials_one_result_ends_it_as_invalid_at_epoch_0_whatever_else_it_holds():
    result = invalid_result("model: headdim must divide expand*d_model")
    assert stop_reason(GateConfig(epoch=2, ratio_to_e0=0.9), 4, result, errored=False) == ("invalid", 0)
    assert result["val_loss"] == float("inf")  # Tune requires the metric in every result


def test_an_initial_point_the_recipe_refuses_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"initial\[0\] is a combination the recipe refuses .*headdim"):
        space_of({"model.d_model": {"choices": [32, 48]}, "model.headdim": {"choices": [16, 64]}},
                 initial=[{"model.d_model": 48, "model.headdim": 64}])


def test_a_range_is_checked_at_its_ends_and_at_each_value_of_a_short_one():
    with pytest.raises(ConfigError, match=r"search.data.window: 0 is refused in every combination"):
        space_of({"data.window": {"low": 0, "high": 64, "step": 16}})
    with pytest.raises(ConfigError, match=r"search.train.warmup_fraction: 1.0 is refused .*warmup_fraction"):
        space_of({"train.warmup_fraction": {"low": 0.0, "high": 1.0}})


def test_the_searchable_names_are_the_short_ones_and_every_scalar_setting_the_sweep_does_not_set():
    settings = searchable_settings()
    assert {"model.d_model", "model.headdim", "data.window", "data.residual_to", "train.warmup_fraction",
            "train.precision", "train.lr"} <= set(settings)
    assert not {"train.epochs", "train.seed", "train.device", "train.threads", "data.fold", "data.columns",
                "data.target", "data.horizon", "model.n_features", "model.residual", "train.betas"} & set(settings)
    assert {alias: resolve(alias).name for alias in ALIASES} == dict(ALIASES)
    assert resolve("model.bias").kind is bool and resolve("data.window").kind is int


def test_the_largest_configuration_is_the_valid_combination_of_sizes_with_the_largest_product():
    space = space_of({"batch_size": {"choices": [64, 4096]}, "learning_rate": {"low": 1e-4, "high": 1e-2},
                      "model.d_model": {"choices": [32, 48]}, "model.headdim": {"choices": [16, 64]},
                      "data.window": {"low": 16, "high": 64, "step": 16}})
    # (48, 64) is refused; of the valid ones 32 x 64 x 64 multiplies to the most (48 x 16 x 64 to less)
    assert largest_params(space.search, space.run) == {"model.d_model": 32, "model.headdim": 64, "data.window": 64}
    assert largest_params(space_of({"learning_rate": {"low": 1e-4, "high": 1e-2}}).search, space.run) == {}


def test_progress_lines_show_the_settings_beyond_the_first_three():
    assert other_params_text({"learning_rate": 1e-3, "model.d_model": 64, "train.warmup_fraction": 0.125,
                              "seed": 1}) == "model.d_model=64 train.warmup_fraction=0.125"
    assert other_params_text({"learning_rate": 1e-3, "batch_size": 64}) == ""


def test_optuna_samples_a_stepped_int_range_on_its_grid():
    space = space_of({"data.window": {"low": 32, "high": 256, "step": 32}})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    values = {study.ask(optuna_space(space)).params["data.window"] for _ in range(40)}
    assert values <= set(range(32, 257, 32)) and len(values) > 4


def test_a_stepped_float_range_ends_on_its_high_exactly_and_loads():
    spec = FloatRange(low=0.05, high=0.06, step=0.01)  # 0.05 + 0.01 is 0.060000000000000005 in binary
    assert spec.values() == (0.05, 0.06)
    space_of({"weight_decay": {"low": 0.05, "high": 0.06, "step": 0.01}})  # its high is accepted, not refused
