"""The one way tests make bars: synthetic OHLCV bars (model/synth.py) written as a Parquet file."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from model.synth import synth_bars


def write_bars(path: Path, n_bars: int, seed: int) -> Path:
    """`n_bars` synthetic bars of `seed` in the Parquet file `path`; -> path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(synth_bars(n_bars, seed=seed), path)
    return path
