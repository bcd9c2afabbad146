"""load_dataset with align_window: every window of a sweep sampled as its longest allows (tuning/search/sample_alignment.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.bars import DataError, read_bars
from model.data import DataConfig, load_dataset
from tests.model.test_data import CONFIG, as_tensor, write_synth


@pytest.fixture(scope="module")
def bars_file(tmp_path_factory):
    return write_synth(tmp_path_factory.mktemp("aligned") / "bars.parquet")


def test_load_dataset_align_window_gives_every_window_the_samples_of_the_longest(bars_file):
    # window 32 aligned to 256 and window 256 itself: the same samples of every segment, the same scaling and HAR
    short, long = (load_dataset(bars_file, DataConfig(**{**CONFIG.to_dict(), **changes}))
                   for changes in ({"window": 32, "align_window": 256}, {"window": 256}))
    timestamps = read_bars(bars_file).timestamp
    for segment in ("train_index", "val_index", "test_index"):
        assert np.array_equal(getattr(short, segment), getattr(long, segment)), segment
    assert np.array_equal(timestamps[short.val_index], timestamps[long.val_index])
    assert short.val_index[0] == short.split_bar + 255 and short.test_index[0] == short.test_bar + 255
    torch.testing.assert_close(as_tensor(short.summary["har"]["coefficients"]),
                               as_tensor(long.summary["har"]["coefficients"]))
    torch.testing.assert_close(short.baselines, long.baselines)
    torch.testing.assert_close(short.test_baselines, long.test_baselines)
    torch.testing.assert_close((short.scaler.target_mean, short.scaler.target_std),
                               (long.scaler.target_mean, long.scaler.target_std))
    assert (short.window, short.summary["window"], short.summary["align_window"]) == (32, 32, 256)
    inputs, targets = short.batch(short.val_index[:4])  # the model still reads its own window
    assert inputs.shape == (4, 32, short.n_features) and targets.shape == (4, 1)


def test_load_dataset_align_window_at_the_window_changes_nothing(bars_file):
    dataset = load_dataset(bars_file, CONFIG)
    aligned = load_dataset(bars_file, DataConfig(**{**CONFIG.to_dict(), "align_window": CONFIG.window}))
    for segment in ("train_index", "val_index", "test_index"):
        assert np.array_equal(getattr(aligned, segment), getattr(dataset, segment)), segment
    torch.testing.assert_close(aligned.baselines, dataset.baselines)
    torch.testing.assert_close(as_tensor(aligned.features), as_tensor(dataset.features))


def test_load_dataset_too_few_bars_for_the_aligned_window_says_so(tmp_path):
    path = write_synth(tmp_path / "bars.parquet", n=1000)
    load_dataset(path, CONFIG)  # enough for its own window
    with pytest.raises(DataError, match=r"1,000 bars are too few, window 32 aligned to 256 \(the longest data.window "
                                        r"the search tries\) \+ horizon 6 \+ at least 32 samples .* need 2,925 bars"):
        load_dataset(path, DataConfig(**{**CONFIG.to_dict(), "align_window": 256}))
