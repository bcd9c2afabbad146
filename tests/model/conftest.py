"""Shared by the model tests: a small dataset of synthetic bars, made once per session."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from model.data import DataConfig, load_dataset
from model.synth import synth_bars


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """1,500 synthetic bars as a Dataset: window 32, horizon 6 (about 1,150 training samples)."""
    path = tmp_path_factory.mktemp("bars") / "bars.parquet"
    pq.write_table(synth_bars(1500, seed=3), path)
    return load_dataset(path, DataConfig(window=32, horizon=6))
