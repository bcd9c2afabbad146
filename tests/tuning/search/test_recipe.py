"""TrainingRecipe: the YAML a run is configured by, written and read back."""

from __future__ import annotations

import pytest

from tuning.search.recipe import ConfigError, TrainingRecipe


def test_recipe_round_trips_through_yaml(tmp_path):
    config = TrainingRecipe.from_dict({"data": {"target": "return", "columns": {"timestamp": "ts_event"}},
                                  "model": {"d_model": 64}, "train": {"lr": 0.001, "betas": [0.9, 0.95]}})
    config.write_yaml(tmp_path / "c.yaml", "mamba-tune train --data x --config c.yaml")
    assert TrainingRecipe.from_yaml(tmp_path / "c.yaml") == config


def test_recipe_defaults_are_the_original_system():
    train = TrainingRecipe().train
    assert (train.lr, train.weight_decay, train.batch_size, train.epochs, train.eps, train.grad_clip) == (
        5e-5, 1e-4, 512, 50, 1e-8, 1.0)
    assert TrainingRecipe().data.val_fraction == 0.2


def test_recipe_replace_validates():
    with pytest.raises(ConfigError, match=r"train: epochs must be a positive integer, got -2"):
        TrainingRecipe().replace("train", epochs=-2)


def test_recipe_section_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"config: section 'train' must be a mapping of settings"):
        TrainingRecipe.from_dict({"train": [1, 2]})


def test_recipe_unreadable_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read the config"):
        TrainingRecipe.from_yaml(tmp_path / "missing.yaml")


def test_recipe_tuned_stop_epoch_is_where_train_stops_and_is_checked():
    """A winner's run stops at its best epoch, or at the stop_epoch `train --epochs` recorded; kept only when set."""
    tuned = {"sweep": "t", "trial": "abc", "best_epoch": 17, "best_val_loss": 0.25, "refit": False}
    assert TrainingRecipe.from_dict({"tuned": tuned}).tuned.last_epoch == 17
    stopped = TrainingRecipe.from_dict({"tuned": {**tuned, "stop_epoch": 3}})
    assert stopped.tuned.last_epoch == 3 and stopped.to_dict()["tuned"] == {**tuned, "stop_epoch": 3}
    with pytest.raises(ConfigError, match="config: tuned: stop_epoch must be a positive integer, got 0"):
        TrainingRecipe.from_dict({"tuned": {**tuned, "stop_epoch": 0}})


def test_recipe_tuned_section_round_trips_and_is_checked(tmp_path):
    tuned = {"sweep": "t", "trial": "abc", "best_epoch": 17, "best_val_loss": 0.25, "refit": False}
    config = TrainingRecipe.from_dict({"train": {"epochs": 50}, "tuned": tuned})
    assert config.tuned.best_epoch == 17 and config.to_dict()["tuned"] == tuned
    config.write_yaml(tmp_path / "best.yaml", "mamba-tune train --data x --config best.yaml")
    assert TrainingRecipe.from_yaml(tmp_path / "best.yaml") == config
    assert "tuned" not in TrainingRecipe().to_dict()  # a plain configuration has none
    marked = {**tuned, "data_sha256": "ab" * 32, "unconfirmed": True}  # best --unconfirmed, with its bars' hash
    assert TrainingRecipe.from_dict({"tuned": marked}).to_dict()["tuned"] == marked
    with pytest.raises(ConfigError, match="config: tuned: best_epoch must be a positive integer, got 0"):
        TrainingRecipe.from_dict({"tuned": {**tuned, "best_epoch": 0}})
    with pytest.raises(ConfigError, match="config: tuned: "):
        TrainingRecipe.from_dict({"tuned": {**tuned, "epochs": 3}})
    with pytest.raises(ConfigError, match="unknown key 'tunde' at the top level, whose sections are data, model, train; "):
        TrainingRecipe.from_dict({"tunde": tuned})
