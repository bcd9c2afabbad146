"""The ways tests make bars: synthetic OHLCV bars (model/synth.py) written as a Parquet file, or exported as a vendor's
CSV and brought in as users bring theirs, with `mamba-tune data import`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from model.synth import synth_bars
from tests.cli import run_cli

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
    and imported into `path` with `mamba-tune data import`, as enough for `space`: the same bars, as a user's
    arrive; -> path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = synth_bars(n_bars, seed=seed)
    times = pc.strftime(table.column("timestamp"), format="%Y-%m-%dT%H:%M:%SZ")
    exported = pa.table({VENDOR_COLUMNS["timestamp"]: times,
                         **{VENDOR_COLUMNS[name]: table.column(name) for name in ("open", "high", "low", "close",
                                                                                   "volume")}})
    source = path.with_suffix(".csv")
    pcsv.write_csv(exported, source, pcsv.WriteOptions(quoting_style="none"))
    done = run_cli("data", "import", source, "--out", path, "--space", space)
    assert done.returncode == 0, done.stderr
    return path
