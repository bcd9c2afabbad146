"""load_dataset: shapes, windows, the three-way chronological split without look-ahead, scaling and baselines."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import DataError, read_bars
from model.data import DataConfig, Dataset, load_dataset, refit_dataset
from model.features import BAR_FEATURES, TARGETS, bar_features, target_and_persistence
from model.synth import synth_bars
from tests.bars import write_bars

N_BARS = 3000
# The bar features alone: the pipeline's mechanics (tests/model/test_inputs.py: the volatility and HAR inputs)
CONFIG = DataConfig(window=32, horizon=6, target="volatility", val_fraction=0.2, test_fraction=0.1, min_val_samples=32,
                    vol_lookbacks=(), residual_to="none")


def as_tensor(array):
    return torch.from_numpy(np.array(array))  # a writable copy


def write_synth(path, n=N_BARS, seed=0):
    write_bars(path, n, seed=seed)
    return path


@pytest.fixture(scope="module")
def bars_file(tmp_path_factory):
    return write_synth(tmp_path_factory.mktemp("data") / "bars.parquet")


@pytest.fixture(scope="module")
def dataset(bars_file) -> Dataset:
    return load_dataset(bars_file, CONFIG)


def raw(path, config=CONFIG):
    """Unscaled features, target and persistence recomputed from the file."""
    bars = read_bars(path)
    return bars_features_and_targets(bars, config)


def bars_features_and_targets(bars, config):
    features = bar_features(bars)
    target, persistence = target_and_persistence(bars.close, features[:, 1], config.target, config.horizon)
    return features, target, persistence


def test_load_dataset_shapes_and_dtypes(dataset, bars_file):
    bars = read_bars(bars_file)
    assert dataset.features.shape == (N_BARS, len(BAR_FEATURES))
    assert dataset.features.dtype == np.float32
    assert dataset.features.flags.c_contiguous
    assert dataset.n_features == 8
    assert dataset.targets.shape == (N_BARS,)
    assert dataset.targets.dtype == np.float32
    assert dataset.train_index.dtype == np.int64 and dataset.val_index.dtype == np.int64
    assert dataset.window == CONFIG.window
    assert dataset.test_index.dtype == np.int64
    assert (dataset.split_bar, dataset.test_bar) == (2100, 2700)  # 70 / 20 / 10
    assert dataset.summary == {
        "path": str(dataset.summary["path"]), "n_bars": N_BARS, "first_bar_ns": int(bars.timestamp[0]),
        "last_bar_ns": int(bars.timestamp[-1]), "fold": 1, "timezone": "UTC", "split_bar": 2100, "test_bar": 2700,
        "n_train": len(dataset.train_index), "n_val": len(dataset.val_index), "n_test": len(dataset.test_index),
        "target": "volatility", "horizon": CONFIG.horizon, "window": CONFIG.window, "features": list(BAR_FEATURES),
        "vol_lookbacks": [], "leverage_lookbacks": [], "residual_to": "none", "har": {"lookbacks": [1, 6, 24, 60], "coefficients": dataset.summary["har"]["coefficients"]},
        "objective": "mse_log", "variance_mean": dataset.summary["variance_mean"],
    }
    assert len(dataset.summary["har"]["coefficients"]) == 5  # the intercept and one per lookback


def test_load_dataset_sample_indices_are_every_sample_that_fits(dataset):
    w, h, s, t = CONFIG.window, CONFIG.horizon, dataset.split_bar, dataset.test_bar
    np.testing.assert_array_equal(dataset.train_index, np.arange(max(w, h), s - h))
    np.testing.assert_array_equal(dataset.val_index, np.arange(s + w - 1, t - h))
    np.testing.assert_array_equal(dataset.test_index, np.arange(t + w - 1, N_BARS - h))


def test_load_dataset_walk_forward_fold_validates_on_the_segment_before_the_last_folds(bars_file, dataset):
    """Fold 2 validates on bars 1500..2099 (fold 1's 600 bars, moved 600 earlier) and trains on those before."""
    w, h = CONFIG.window, CONFIG.horizon
    fold2 = load_dataset(bars_file, DataConfig(**{**CONFIG.to_dict(), "fold": 2}))
    assert (fold2.split_bar, fold2.test_bar, fold2.summary["fold"]) == (1500, 2700, 2)
    np.testing.assert_array_equal(fold2.train_index, np.arange(max(w, h), 1500 - h))
    np.testing.assert_array_equal(fold2.val_index, np.arange(1500 + w - 1, 2100 - h))
    np.testing.assert_array_equal(fold2.test_index, dataset.test_index)  # never used, never moved
    assert fold2.scaler.target_mean != dataset.scaler.target_mean  # scaled from its own, shorter training segment
    tight = {**CONFIG.to_dict(), "val_fraction": 0.298, "fold": 3}  # fold 3 trains on the first 18 bars
    with pytest.raises(DataError, match=r"3,000 bars are too few.*need ([\d,]+) bars at data.val_fraction 0.298 and "
                                        r"data.test_fraction 0.1 and walk-forward fold 3 \(confirm.folds\); use more "
                                        r"bars, or data.window at most 11, or confirm.folds at most 2") as info:
        load_dataset(bars_file, DataConfig(**tight))
    needed = int(re.search(r"need ([\d,]+) bars", str(info.value)).group(1).replace(",", ""))
    enough = load_dataset(write_synth(bars_file.parent / "enough_for_fold_3.parquet", n=needed), DataConfig(**tight))
    assert len(enough.train_index) >= 1 and len(enough.val_index) >= 32
    with pytest.raises(DataError, match=r"walk-forward fold 5 \(confirm.folds\) would start before the first bar: "
                                        r"5 validation segments of data.val_fraction 0.2 and data.test_fraction 0.1 "
                                        r"leave no bar to train on; use confirm.folds at most 4 or a smaller "
                                        r"data.val_fraction"):
        load_dataset(bars_file, DataConfig(**{**CONFIG.to_dict(), "fold": 5}))


def test_load_dataset_without_a_test_segment_is_the_two_way_split(bars_file):
    ds = load_dataset(bars_file, DataConfig(window=32, horizon=6, val_fraction=0.2, test_fraction=0))
    assert (ds.split_bar, ds.test_bar, ds.summary["n_test"]) == (2400, N_BARS, 0)
    np.testing.assert_array_equal(ds.val_index, np.arange(2400 + 31, N_BARS - 6))
    assert ds.test_index.shape == (0,) and ds.test_baselines == {}


def test_dataset_batch_shapes_and_exact_windows(dataset):
    w = CONFIG.window
    index = np.array([dataset.train_index[0], dataset.train_index[-1], dataset.val_index[0], dataset.val_index[-1], 1000])
    inputs, targets = dataset.batch(index)
    assert inputs.shape == (5, w, 8) and inputs.dtype == torch.float32
    assert targets.shape == (5, 1) and targets.dtype == torch.float32
    for row, i in enumerate(index):
        torch.testing.assert_close(inputs[row], as_tensor(dataset.features[i - w + 1 : i + 1]), rtol=0, atol=0)
        torch.testing.assert_close(targets[row, 0], as_tensor(dataset.targets[i]), rtol=0, atol=0)


def test_dataset_batch_accepts_a_tensor_index(dataset):
    index = dataset.val_index[::50]
    from_numpy = dataset.batch(index)
    from_tensor = dataset.batch(torch.from_numpy(index))
    for a, b in zip(from_numpy, from_tensor, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_dataset_windows_are_views_and_the_batch_is_a_copy(dataset):
    features = torch.from_numpy(dataset.features)
    windows = features.unfold(0, CONFIG.window, 1).transpose(1, 2)
    assert windows.shape == (N_BARS - CONFIG.window + 1, CONFIG.window, 8)
    assert windows.data_ptr() == features.data_ptr() == dataset.features.ctypes.data
    assert np.shares_memory(windows.numpy(), dataset.features)
    inputs, targets = dataset.batch(dataset.train_index[:4])
    assert not np.shares_memory(inputs.numpy(), dataset.features)
    assert not np.shares_memory(targets.numpy(), dataset.targets)
    before = dataset.features.copy()
    inputs += 1.0  # a batch is the caller's to change
    np.testing.assert_array_equal(dataset.features, before)


def test_load_dataset_features_are_scaled_with_the_scaler(bars_file, dataset):
    features, target, _ = raw(bars_file)
    scaler = dataset.scaler
    expected = (features - scaler.feature_mean) / scaler.feature_std
    torch.testing.assert_close(as_tensor(dataset.features), as_tensor(expected), rtol=1e-6, atol=1e-6)
    expected_target = ((target - scaler.target_mean) / scaler.target_std).astype(np.float32)
    torch.testing.assert_close(as_tensor(dataset.targets), as_tensor(expected_target), rtol=0, atol=0, equal_nan=True)


def test_load_dataset_feature_scaling_uses_the_training_part_only(bars_file, dataset):
    features, _, _ = raw(bars_file)
    s, h = dataset.split_bar, CONFIG.horizon
    train_rows = features[1 : s - h].astype(np.float64)
    torch.testing.assert_close(as_tensor(dataset.scaler.feature_mean), as_tensor(train_rows.mean(axis=0).astype(np.float32)))
    torch.testing.assert_close(as_tensor(dataset.scaler.feature_std), as_tensor(train_rows.std(axis=0).astype(np.float32)))
    whole = features[1:].astype(np.float64)
    assert not np.allclose(dataset.scaler.feature_mean, whole.mean(axis=0), rtol=1e-4, atol=0)
    assert not np.allclose(dataset.scaler.feature_std, whole.std(axis=0), rtol=1e-4, atol=0)
    # Scaled training rows are centred and unit-variance; the scaled validation part is not exactly.
    scaled = dataset.features[1 : s - h].astype(np.float64)
    torch.testing.assert_close(as_tensor(scaled.mean(axis=0)), torch.zeros(8, dtype=torch.float64), rtol=0, atol=1e-5)
    torch.testing.assert_close(as_tensor(scaled.std(axis=0)), torch.ones(8, dtype=torch.float64), rtol=0, atol=1e-5)


def test_load_dataset_target_scaling_uses_training_samples_only(bars_file, dataset):
    _, target, _ = raw(bars_file)
    train_targets = target[dataset.train_index]
    assert np.isfinite(train_targets).all()
    assert dataset.scaler.target_mean == pytest.approx(train_targets.mean(), rel=1e-12)
    assert dataset.scaler.target_std == pytest.approx(train_targets.std(), rel=1e-12)
    usable = np.isfinite(target)
    assert dataset.scaler.target_mean != pytest.approx(target[usable].mean(), rel=1e-6)
    torch.testing.assert_close(as_tensor(dataset.targets[dataset.train_index].astype(np.float64).mean()),
                               torch.tensor(0.0, dtype=torch.float64), rtol=0, atol=1e-5)


def test_load_dataset_training_samples_lie_before_the_split(dataset):
    w, h, s = CONFIG.window, CONFIG.horizon, dataset.split_bar
    first_input = dataset.train_index - (w - 1)
    last_target = dataset.train_index + h
    assert first_input.min() >= 1  # bar 0 has no previous bar and is never an input
    assert last_target.max() < s
    assert last_target.max() == s - 1  # and nothing usable is thrown away


def test_load_dataset_validation_windows_start_at_or_after_the_split(dataset):
    w, h, s = CONFIG.window, CONFIG.horizon, dataset.split_bar
    first_input = dataset.val_index - (w - 1)
    assert first_input.min() == s
    assert dataset.val_index.max() + h == dataset.test_bar - 1  # targets end before the test segment
    train_bars = set()
    for i in dataset.train_index:
        train_bars.update(range(i - w + 1, i + h + 1))
    val_bars = set()
    for i in dataset.val_index:
        val_bars.update(range(i - w + 1, i + 1))
    assert not train_bars & val_bars


def test_load_dataset_test_samples_touch_no_training_or_validation_bar(dataset):
    w, h, t = CONFIG.window, CONFIG.horizon, dataset.test_bar
    assert (dataset.test_index - (w - 1)).min() == t
    assert dataset.test_index.max() + h == N_BARS - 1
    used = set()
    for i in np.concatenate([dataset.train_index, dataset.val_index]):
        used.update(range(i - w + 1, i + h + 1))  # inputs and target
    test_bars = set()
    for i in dataset.test_index:
        test_bars.update(range(i - w + 1, i + h + 1))
    assert not used & test_bars


def test_load_dataset_ignores_the_validation_part_when_scaling(tmp_path):
    """Changing every bar from the split on leaves the scaler and all training data unchanged."""
    table = synth_bars(N_BARS, 5)
    split = int(round(N_BARS * (1 - CONFIG.test_fraction - CONFIG.val_fraction)))
    factor = np.where(np.arange(N_BARS) >= split, 1.5, 1.0)
    changed = table
    for name in ("open", "high", "low", "close"):
        column = table.column(name).to_numpy() * factor
        changed = changed.set_column(changed.schema.get_field_index(name), name, pa.array(column))
    volume = table.column("volume").to_numpy() * np.where(factor > 1, 7, 1)
    changed = changed.set_column(changed.schema.get_field_index("volume"), "volume", pa.array(volume))
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(changed, tmp_path / "b.parquet")
    a, b = load_dataset(tmp_path / "a.parquet", CONFIG), load_dataset(tmp_path / "b.parquet", CONFIG)
    assert a.split_bar == b.split_bar == split
    torch.testing.assert_close(as_tensor(a.scaler.feature_mean), as_tensor(b.scaler.feature_mean), rtol=0, atol=0)
    torch.testing.assert_close(as_tensor(a.scaler.feature_std), as_tensor(b.scaler.feature_std), rtol=0, atol=0)
    assert a.scaler.target_mean == b.scaler.target_mean and a.scaler.target_std == b.scaler.target_std
    train_inputs_a, train_targets_a = a.batch(a.train_index)
    train_inputs_b, train_targets_b = b.batch(b.train_index)
    torch.testing.assert_close(train_inputs_a, train_inputs_b, rtol=0, atol=0)
    torch.testing.assert_close(train_targets_a, train_targets_b, rtol=0, atol=0)
    assert not np.allclose(a.features[split], b.features[split])  # the validation part did change


def test_load_dataset_baselines(bars_file, dataset):
    _, target, persistence = raw(bars_file)
    mean, std = dataset.scaler.target_mean, dataset.scaler.target_std
    val = dataset.val_index
    scaled_target = (target[val] - mean) / std
    scaled_persistence = (persistence[val] - mean) / std
    assert np.isfinite(scaled_persistence).all()
    assert dataset.baselines["mean"] == pytest.approx(np.mean(scaled_target**2), rel=1e-5)
    assert dataset.baselines["persistence"] == pytest.approx(np.mean((scaled_persistence - scaled_target) ** 2), rel=1e-5)
    # The mean baseline is also the MSE of predicting the training mean in raw units, rescaled.
    assert dataset.baselines["mean"] == pytest.approx(np.mean((target[val] - mean) ** 2) / std**2, rel=1e-5)
    assert set(dataset.baselines) == set(dataset.test_baselines) == {"har", "mean", "persistence"}
    test = dataset.test_index
    assert dataset.test_baselines["persistence"] == pytest.approx(
        np.mean(((persistence[test] - target[test]) / std) ** 2), rel=1e-5)
    assert dataset.test_baselines["mean"] == pytest.approx(np.mean((target[test] - mean) ** 2) / std**2, rel=1e-5)


def log_volatility_over(log_range, i, length):
    """The log Parkinson volatility of bars i-length+1..i (from bar 0 at the start), written out."""
    squares = log_range[max(0, i - length + 1) : i + 1].astype(np.float64) ** 2
    return np.log(np.sqrt(squares.mean() / (4 * np.log(2))))


def test_load_dataset_har_is_least_squares_on_the_training_samples_alone(bars_file, dataset):
    features, target, _ = raw(bars_file)
    lookbacks = (1, 6, 24, 60)

    def design(index):
        return np.array([[1.0] + [log_volatility_over(features[:, 1], i, n) for n in lookbacks] for i in index])

    scaled = (target - dataset.scaler.target_mean) / dataset.scaler.target_std
    coefficients, *_ = np.linalg.lstsq(design(dataset.train_index), scaled[dataset.train_index], rcond=None)
    torch.testing.assert_close(as_tensor(dataset.summary["har"]["coefficients"]), as_tensor(coefficients),
                               rtol=1e-4, atol=1e-4)
    for index, baselines in ((dataset.val_index, dataset.baselines), (dataset.test_index, dataset.test_baselines)):
        expected = np.mean((design(index) @ coefficients - scaled[index]) ** 2)
        assert baselines["har"] == pytest.approx(expected, rel=1e-4)


def test_load_dataset_har_is_the_strongest_baseline_for_volatility(dataset):
    for baselines in (dataset.baselines, dataset.test_baselines):
        assert baselines["har"] < baselines["persistence"] < baselines["mean"]


@pytest.mark.parametrize("target", TARGETS)
def test_load_dataset_each_target_is_finite_at_every_sample(bars_file, target):
    config = DataConfig(window=32, horizon=6, target=target, min_val_samples=32)
    ds = load_dataset(bars_file, config)
    _, raw_target, persistence = raw(bars_file, config)
    for index in (ds.train_index, ds.val_index):
        assert np.isfinite(ds.targets[index]).all()
        assert np.isfinite(persistence[index]).all()
    for baselines in (ds.baselines, ds.test_baselines):
        assert all(np.isfinite(v) for v in baselines.values()) and set(baselines) == {"har", "persistence", "mean"}
    assert ds.summary["target"] == target
    expected = ((raw_target - ds.scaler.target_mean) / ds.scaler.target_std).astype(np.float32)
    torch.testing.assert_close(as_tensor(ds.targets), as_tensor(expected), rtol=0, atol=0, equal_nan=True)
    n_undefined = 1 if target == "close" else config.horizon  # close is always one bar ahead
    assert np.isnan(ds.targets[-n_undefined:]).all()
    assert np.isfinite(ds.targets[: N_BARS - n_undefined]).all()


def test_load_dataset_persistence_is_a_real_baseline_for_volatility(dataset):
    # Volatility clusters, so yesterday's volatility beats the unconditional mean.
    assert dataset.baselines["persistence"] < dataset.baselines["mean"]


def test_load_dataset_with_a_column_mapping(tmp_path):
    table = synth_bars(N_BARS, 0).rename_columns(["ts_event", "open", "high", "low", "close", "volume"])
    pq.write_table(table, tmp_path / "renamed.parquet")
    with pytest.raises(DataError, match=r"column 'timestamp' \(timestamp\) is missing"):
        load_dataset(tmp_path / "renamed.parquet", CONFIG)
    config = DataConfig(**{**CONFIG.to_dict(), "columns": {"timestamp": "ts_event"}})
    mapped = load_dataset(tmp_path / "renamed.parquet", config)
    reference = load_dataset(write_synth(tmp_path / "plain.parquet"), CONFIG)
    torch.testing.assert_close(as_tensor(mapped.features), as_tensor(reference.features), rtol=0, atol=0)


def test_load_dataset_too_few_bars(tmp_path):
    path = write_synth(tmp_path / "short.parquet", n=200)
    with pytest.raises(DataError, match=re.escape(f"{path}: 200 bars are too few, window 128 + horizon 12 + at least 32 "
                                                  "samples in the validation and test segments need ")
                       + r"1,705 bars at data.val_fraction 0.2 and data.test_fraction 0.1; use more bars"):
        load_dataset(path)


def test_load_dataset_too_few_bars_names_the_smallest_count_that_works(tmp_path):
    config = DataConfig(window=16, horizon=4, min_val_samples=8, val_fraction=0.25)
    with pytest.raises(DataError, match=r"need ([\d,]+) bars") as info:
        load_dataset(write_synth(tmp_path / "tiny.parquet", n=30), config)
    needed = int(re.search(r"need ([\d,]+) bars", str(info.value)).group(1).replace(",", ""))
    ds = load_dataset(write_synth(tmp_path / "enough.parquet", n=needed), config)
    assert len(ds.train_index) >= 1 and len(ds.val_index) >= config.min_val_samples
    assert len(ds.test_index) >= config.min_val_samples
    with pytest.raises(DataError, match=rf"{needed - 1:,} bars are too few"):
        load_dataset(write_synth(tmp_path / "one_short.parquet", n=needed - 1), config)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"window": 0}, r"window must be a positive integer, got 0"),
        ({"horizon": -2}, r"horizon must be a positive integer, got -2"),
        ({"window": 8.0}, r"window must be a positive integer, got 8.0"),
        ({"window": True}, r"window must be a positive integer, got True"),
        ({"min_val_samples": 0}, r"min_val_samples must be a positive integer, got 0"),
        ({"target": "price"}, r"target must be one of return, volatility, close, got 'price'"),
        ({"val_fraction": 1.0}, r"val_fraction must be a number between 0.01 and 0.99, got 1.0"),
        ({"val_fraction": 0}, r"val_fraction must be a number between 0.01 and 0.99, got 0"),
        ({"test_fraction": -0.1}, r"test_fraction must be a number between 0 \(no test segment\) and 0.98, got -0.1"),
        ({"test_fraction": "10%"}, r"test_fraction must be a number between 0 \(no test segment\) and 0.98"),
        ({"val_fraction": 0.5, "test_fraction": 0.5},
         r"val_fraction \+ test_fraction must be at most 0.99 so that bars are left to train on, got 0.5 \+ 0.5"),
        ({"columns": {"price": "close"}}, r"columns must map bar fields \(timestamp, open, .*\) to column names"),
        ({"columns": {"timestamp": 5}}, r"columns must map bar fields"),
        ({"window": 16, "vol_lookbacks": [1, 5, 22]},
         r"vol_lookbacks: a lookback of 22 bars is longer than the window of 16 bars, .*; use lookbacks of at most 16 "
         r"bars or a longer window"),
        ({"vol_lookbacks": [0, 4]}, r"vol_lookbacks must be a list of positive integers \(bars\), got \(0, 4\)"),
        ({"vol_lookbacks": "5"}, r"vol_lookbacks must be a list of positive integers"),
        ({"vol_lookbacks": [5, 5]}, r"vol_lookbacks must not repeat a lookback, got \[5, 5\]"),
        ({"window": 16, "leverage_lookbacks": [1, 5, 22]},
         r"leverage_lookbacks: a lookback of 22 bars is longer than the window of 16 bars, .*; use lookbacks of at "
         r"most 16 bars or a longer window"),
        ({"leverage_lookbacks": [-1]}, r"leverage_lookbacks must be a list of positive integers \(bars\), got \(-1,\)"),
        ({"leverage_lookbacks": [3, 3]}, r"leverage_lookbacks must not repeat a lookback, got \[3, 3\]"),
        ({"residual_to": "arima"}, r"residual_to must be one of har, none \(the baseline the model corrects, or none\), "
                                   r"got 'arima'"),
        ({"window": 64, "align_window": 32},
         r"align_window 32 is shorter than the window of 64 bars, .*; use an align_window of at least 64, or remove it"),
        ({"align_window": 0}, r"align_window must be a positive integer, got 0"),
        ({"align_window": 1.5}, r"align_window must be a positive integer, got 1.5"),
    ],
)
def test_data_config_rejects_bad_values(values, match):
    with pytest.raises(ValueError, match=match):
        DataConfig(**values)


def test_data_config_from_dict_rejects_an_unknown_key():
    with pytest.raises(ValueError, match=r"unknown data setting 'stride'; allowed: window, horizon, target, "
                                         r"val_fraction, test_fraction, min_val_samples, fold, columns, "
                                         r"vol_lookbacks, residual_to, leverage_lookbacks"):
        DataConfig.from_dict({"window": 16, "stride": 2})


def test_data_config_round_trips_through_a_dict():
    config = DataConfig(window=16, horizon=3, target="return", val_fraction=0.3, test_fraction=0.15, min_val_samples=4,
                        columns={"timestamp": "ts_event"}, vol_lookbacks=[2, 8], residual_to="none",
                        leverage_lookbacks=[1, 5])
    assert config.vol_lookbacks == (2, 8) and config.to_dict()["vol_lookbacks"] == [2, 8]  # a list for YAML
    assert config.leverage_lookbacks == (1, 5) and config.to_dict()["leverage_lookbacks"] == [1, 5]
    assert DataConfig.from_dict(config.to_dict()) == config
    assert DataConfig.from_dict(DataConfig().to_dict()) == DataConfig()
    with pytest.raises(ValueError, match=r"window must be a positive integer, got 0"):
        DataConfig.from_dict({"window": 0})


def test_load_dataset_centres_a_constant_feature_without_blowing_it_up(tmp_path):
    """Daily bars (date32 timestamps, all at midnight) have a constant time of day: scaled to 0, not inf/NaN."""
    table = synth_bars(600, 1)
    days = pa.array(np.arange(600, dtype=np.int32) + 19_723, type=pa.date32())
    path = tmp_path / "daily.parquet"
    pq.write_table(table.set_column(0, "timestamp", days), path)
    ds = load_dataset(path, DataConfig(window=16, horizon=4, min_val_samples=8))
    assert np.isfinite(ds.features).all()
    torch.testing.assert_close(as_tensor(ds.features[:, 6:8]), torch.zeros(600, 2), rtol=0, atol=0)
    torch.testing.assert_close(as_tensor(ds.scaler.feature_std[6:8]), torch.ones(2), rtol=0, atol=0)
    assert (ds.scaler.feature_std[:6] > 1e-6).all()


def test_load_dataset_feature_constant_only_in_training_is_not_blown_up(tmp_path):
    """Volume 0 through the training part, then trading: the validation inputs stay of order 1, not 1e8."""
    table = synth_bars(1200, 4)
    volume = table.column("volume").to_numpy().copy()
    volume[:1000] = 0
    path = tmp_path / "bars.parquet"
    pq.write_table(table.set_column(5, "volume", [volume]), path)
    ds = load_dataset(path, DataConfig(window=16, horizon=4, min_val_samples=8))
    assert ds.scaler.feature_std[5] == 1.0
    assert np.abs(ds.features[ds.split_bar:, 5]).max() < 20


def test_dataset_shared_read_only_gives_the_same_batches(tmp_path):
    """As several trials see it through Ray's object store: pickled, read-only, no copy."""
    import pickle
    import warnings

    path = tmp_path / "bars.parquet"
    write_bars(path, 800, seed=2)
    data = load_dataset(path, DataConfig(window=16, horizon=4))
    shared = pickle.loads(pickle.dumps(data))
    for array in (shared.features, shared.targets):
        array.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inputs, targets = shared.batch(shared.val_index[:5])
    expected_inputs, expected_targets = data.batch(data.val_index[:5])
    torch.testing.assert_close(inputs, expected_inputs, rtol=0, atol=0)
    torch.testing.assert_close(targets, expected_targets, rtol=0, atol=0)


def test_load_dataset_test_har_is_hars_forecast_of_each_test_sample(bars_file, dataset):
    features, _, _ = raw(bars_file)
    design = np.array([[1.0] + [log_volatility_over(features[:, 1], i, n) for n in (1, 6, 24, 60)]
                       for i in dataset.test_index])  # (n_test, 5), written out
    assert dataset.test_har.shape == dataset.test_index.shape and dataset.test_har.dtype == np.float64
    torch.testing.assert_close(as_tensor(dataset.test_har),
                               as_tensor(design @ np.array(dataset.summary["har"]["coefficients"])),
                               rtol=1e-4, atol=1e-4)
    squared = (dataset.test_har - dataset.targets[dataset.test_index].astype(np.float64)) ** 2  # (n_test,)
    torch.testing.assert_close(float(squared.mean()), dataset.test_baselines["har"])
    torch.testing.assert_close(as_tensor(refit_dataset(dataset).test_har), as_tensor(dataset.test_har))


def test_load_dataset_test_har_is_empty_without_a_test_segment(bars_file):
    ds = load_dataset(bars_file, DataConfig(window=32, horizon=6, val_fraction=0.2, test_fraction=0))
    assert ds.test_har.shape == (0,)


def test_load_dataset_of_bars_without_volume_has_every_input_but_volume_change(bars_file, tmp_path):
    table = pq.read_table(bars_file)
    no_volume = tmp_path / "fx.parquet"
    pq.write_table(table.drop_columns(["volume"]), no_volume)
    config = DataConfig(window=32, horizon=6, min_val_samples=32)  # HAR's volatilities and falls, and har: by name
    full, fx = load_dataset(bars_file, config), load_dataset(no_volume, config)
    names = full.summary["features"]
    assert fx.summary["features"] == [n for n in names if n != "volume_change"] and "volume_change" in names
    assert fx.n_features == full.n_features - 1 == len(fx.summary["features"])
    kept = [names.index(n) for n in fx.summary["features"]]
    torch.testing.assert_close(as_tensor(fx.features), as_tensor(full.features[:, kept]), rtol=0, atol=0)
    torch.testing.assert_close(as_tensor(fx.targets), as_tensor(full.targets), rtol=0, atol=0, equal_nan=True)
