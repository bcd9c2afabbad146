"""The ways tests make bars: synthetic OHLCV bars (model/synth.py) written as a Parquet file, or exported as a vendor's
CSV and brought in as users bring theirs, with `mamba-tune data import`; and bars written as Yahoo's CSV export."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from model.synth import synth_bars
from tests.cli import run_cli

YAHOO_HEADER = "Date,Open,High,Low,Close,Adj Close,Volume"  # Yahoo Finance's CSV export
# A vendor's layout: none of mamba-tune's own names but the common spellings `data import` knows.
VENDOR_COLUMNS = {"timestamp": "Datetime", "open": "Open", "high": "High", "low": "Low", "close": "Last",
                  "volume": "Volume"}


def write_bars(path: Path, n_bars: int, seed: int) -> Path:
    """`n_bars` synthetic bars of `seed` in the Parquet file `path`; -> path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(synth_bars(n_bars, seed=seed), path)
    return path


def import_bars_from_csv(path: Path, n_bars: int, seed: int, space: Path) -> Path:
    """The bars write_bars writes, exported as a vendor's CSV (ISO 8601 times in UTC, VENDOR_COLUMNS) beside `path`
    and imported into `path` with `mamba-tune data import`, and enough for `space` as `data check` says: the same
    bars, as a user's arrive; -> path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = synth_bars(n_bars, seed=seed)
    times = pc.strftime(table.column("timestamp"), format="%Y-%m-%dT%H:%M:%SZ")
    exported = pa.table({VENDOR_COLUMNS["timestamp"]: times,
                         **{VENDOR_COLUMNS[name]: table.column(name) for name in ("open", "high", "low", "close",
                                                                                   "volume")}})
    source = path.with_suffix(".csv")
    pcsv.write_csv(exported, source, pcsv.WriteOptions(quoting_style="none"))
    done = run_cli("data", "import", source, "--out", path)
    assert done.returncode == 0, done.stderr
    checked = run_cli("data", "check", path, "--space", space)
    assert checked.returncode == 0, checked.stderr
    return path


def yahoo_rows(table: pa.Table) -> list[str]:
    """The bars as Yahoo's CSV export writes them (Adj Close a little below Close, as dividends make it)."""
    days = np.datetime_as_string(table.column("timestamp").to_numpy().astype("datetime64[D]"))
    columns = [table.column(name).to_numpy() for name in ("open", "high", "low", "close")]
    volume = table.column("volume").to_numpy()
    return [f"{d},{float(o)!r},{float(h)!r},{float(lo)!r},{float(c)!r},{float(c) * 0.97!r},{int(v)}"
            for d, o, h, lo, c, v in zip(days, *columns, volume, strict=True)]


def write_csv(path: Path, rows: list[str], header: str = YAHOO_HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path
