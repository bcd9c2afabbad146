"""The objective in MLflow (tuning/tracking/objective.py): one key per objective for every loss, and runs recorded
before objectives read as their target's default (mse_log for volatility)."""

from __future__ import annotations

import pytest

from tuning.search.searchable import resolve
from tuning.tracking.objective import (
    LOSS_METRICS,
    OBJECTIVE_TAG,
    keyed,
    metric_key,
    recorded_objective,
)
from tuning.tracking.ops import STEP_MARKERS
from tuning.tracking.runs import TEST_METRICS
from tuning.tracking.store import EPOCH_METRICS


def test_every_loss_metric_is_keyed_by_its_objective_and_no_other_metric_is():
    assert {metric_key(k, "qlike") for k in EPOCH_METRICS} == {
        "train_loss_qlike", "val_loss_qlike", "best_val_loss_qlike", "lr", "overfit_ratio", "samples_per_s",
        "epoch_s", "peak_memory_mb"}
    look = {f"test_{k}" if k.startswith("baseline_") else k for k in TEST_METRICS}
    assert {metric_key(k, "mse_var") for k in look} == {
        "test_loss_mse_var", "test_baseline_har_mse_var", "test_baseline_persistence_mse_var",
        "test_baseline_mean_mse_var", "n_test"}
    assert keyed({"best_val_loss": 0.3, "trials_finished": 4}, "mse_log") == {"best_val_loss_mse_log": 0.3,
                                                                              "trials_finished": 4}
    keys = {metric_key(name, o) for name in LOSS_METRICS for o in ("mse_log", "mse_var", "qlike", "mse")}
    assert len(keys) == 4 * len(LOSS_METRICS)  # no two objectives share a key


def test_a_run_without_the_tag_reads_as_its_targets_default_under_its_old_keys():
    assert recorded_objective({}) == "mse_log"
    assert recorded_objective({}, "volatility") == "mse_log" and recorded_objective({}, "return") == "mse"
    assert recorded_objective({OBJECTIVE_TAG: "qlike"}, "volatility") == "qlike"
    assert keyed({"val_loss": 0.7, "lr": 1e-3}, None) == {"val_loss": 0.7, "lr": 1e-3}  # its old keys


def test_a_configs_objective_is_its_resolved_loss_or_its_targets_default():
    from model.data import DataConfig

    assert DataConfig().loss == "mse_log"
    assert DataConfig(objective="qlike").loss == "qlike"
    assert DataConfig(target="return").loss == "mse"


def test_a_resumed_trial_finds_its_epochs_under_any_objectives_key():
    assert {"val_loss", "val_loss_mse_log", "val_loss_mse_var", "val_loss_qlike", "val_loss_mse"} <= set(STEP_MARKERS)


def test_searching_the_objective_is_refused_in_one_line():
    with pytest.raises(ValueError) as refused:
        resolve("data.objective")
    message = str(refused.value)
    assert message.startswith("data.objective cannot be searched: runs of different objectives have losses in "
                              "different units") and "\n" not in message


def test_a_space_searching_the_objective_is_refused_in_one_line():
    import copy

    from tests.tuning.sweeps import SPACE
    from tuning.search.space import parse_space
    from tuning.yaml_io import ConfigError

    values = copy.deepcopy(SPACE)
    values["search"]["data.objective"] = {"choices": ["mse_log", "qlike"]}
    with pytest.raises(ConfigError) as refused:
        parse_space(values, "space")
    assert "data.objective cannot be searched: runs of different objectives" in str(refused.value)
    assert "\n" not in str(refused.value)
