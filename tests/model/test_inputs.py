"""The model's inputs beyond single bars: trailing volatilities and the HAR forecast the model corrects."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import read_bars
from model.baselines import har_forecast, past_quantities
from model.data import DataConfig, load_dataset
from model.features import BAR_FEATURES
from tests.bars import write_bars

CONFIG = DataConfig(window=32, horizon=6, min_val_samples=32)  # the defaults: HAR's lookbacks, residual to HAR


@pytest.fixture(scope="module")
def bars_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "bars.parquet"
    write_bars(path, 2000, seed=5)
    return path


@pytest.fixture(scope="module")
def dataset(bars_file):
    return load_dataset(bars_file, CONFIG)


def test_default_inputs_are_the_bar_features_hars_volatilities_and_falls_that_fit_the_window_and_har(dataset):
    assert CONFIG.input_lookbacks == (1, 6, 24)  # HAR's 1, h, 4h; 10h = 60 is longer than the window of 32
    assert CONFIG.input_leverage_lookbacks == (1, 6, 24)  # by default the volatility inputs' lookbacks
    assert dataset.summary["features"] == [*BAR_FEATURES, "vol_1", "vol_6", "vol_24", "fall_1", "fall_6", "fall_24",
                                           "har"]
    assert dataset.n_features == 15 and dataset.residual
    assert dataset.summary["vol_lookbacks"] == [1, 6, 24] and dataset.summary["residual_to"] == "har"
    assert dataset.summary["leverage_lookbacks"] == [1, 6, 24]


def test_the_har_input_is_hars_scaled_forecast_and_scores_as_the_har_baseline(bars_file, dataset):
    bars = read_bars(bars_file)
    log_range = np.log(bars.high) - np.log(bars.low)
    past = past_quantities(bars.close, log_range, "volatility", tuple(dataset.summary["har"]["lookbacks"]))
    expected = har_forecast(past, np.asarray(dataset.summary["har"]["coefficients"]), np.arange(len(bars)))
    torch.testing.assert_close(torch.from_numpy(dataset.features[:, -1]), torch.from_numpy(expected.astype(np.float32)))
    assert (dataset.scaler.feature_mean[-1], dataset.scaler.feature_std[-1]) == (0.0, 1.0)  # already scaled
    for index, baselines in ((dataset.val_index, dataset.baselines), (dataset.test_index, dataset.test_baselines)):
        error = dataset.features[index, -1].astype(np.float64) - dataset.targets[index]
        assert baselines["har"] == pytest.approx(float(np.mean(error**2)), rel=1e-5)


def test_the_volatility_and_fall_inputs_are_scaled_from_the_training_part(dataset):
    train_rows = dataset.features[1 : dataset.split_bar - CONFIG.horizon, 8:14].astype(np.float64)
    torch.testing.assert_close(torch.from_numpy(train_rows.mean(axis=0)), torch.zeros(6, dtype=torch.float64),
                               rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(train_rows.std(axis=0)), torch.ones(6, dtype=torch.float64),
                               rtol=0, atol=1e-5)


def test_changing_a_bar_after_the_training_segment_changes_no_input_before_it(bars_file, dataset, tmp_path):
    """No look-ahead, HAR included: its coefficients and the scaling come from the training segment alone."""
    t = dataset.split_bar + 50  # a validation bar
    table = pq.read_table(bars_file)
    high, close = table.column("high").to_numpy().copy(), table.column("close").to_numpy().copy()
    high[t] *= 1.05
    close[t] = (close[t] + high[t]) / 2
    changed = tmp_path / "changed.parquet"
    pq.write_table(table.set_column(2, "high", pa.array(high)).set_column(4, "close", pa.array(close)), changed)
    after = load_dataset(changed, CONFIG)
    torch.testing.assert_close(torch.from_numpy(after.features[:t]), torch.from_numpy(dataset.features[:t]),
                               rtol=0, atol=0)
    assert not np.array_equal(after.features[t], dataset.features[t])


def test_residual_to_none_leaves_har_out_of_the_inputs(bars_file):
    data = load_dataset(bars_file, DataConfig(window=32, horizon=6, min_val_samples=32, residual_to="none",
                                              vol_lookbacks=(2, 10)))
    assert data.summary["features"] == [*BAR_FEATURES, "vol_2", "vol_10", "fall_2", "fall_10"] and not data.residual
