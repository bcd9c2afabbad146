"""Shared by the model tests: a small dataset of synthetic bars, made once per session."""

from __future__ import annotations

import pytest

from model.data import DataConfig, load_dataset
from tests.bars import write_bars


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """1,500 synthetic bars as a Dataset: window 32, horizon 6 (about 1,150 training samples)."""
    path = tmp_path_factory.mktemp("bars") / "bars.parquet"
    write_bars(path, 1500, seed=3)
    return load_dataset(path, DataConfig(window=32, horizon=6))
