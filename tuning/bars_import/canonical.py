"""Imported bars -> the canonical Parquet every other command reads, with where it came from.

Canonical: timestamp as timestamp[ns] in the bars' zone (instants; the zone is their clock), open, high, low, close
and volume as float64, rows in time order; no volume column where the source has none (FX, indices: the features
that need volume are then left out, model/features.py). The schema's metadata key `mamba_tune.provenance` holds the
import's provenance as JSON: the source file and its SHA-256, its form, the column mapping, whether it has volume,
the instrument, the zone, the epoch unit (and whether it was assumed), whether rows were sorted. The bars are
validated as `data check` validates a file (model/bars.py's rules) before a byte is written; whether they are enough
for a search space is not an import's question (`data check --space`, and `sweep`'s own check, judge that). The file
appears whole or not at all (model/atomic.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from model.atomic import atomic_path
from model.bars import FIELDS, Bars, DataError, first_missing_row, validate_bars
from tuning.bars_file import sha256_of
from tuning.bars_import.source import read_source
from tuning.bars_import.times import instants

PROVENANCE_KEY = b"mamba_tune.provenance"


@dataclass(frozen=True)
class ImportOptions:
    """What the user said of the source (`data import`'s flags); None: not said."""

    columns: dict[str, str]  # field -> the source's column (--column)
    symbol: str | None = None  # the instrument to keep (--symbol)
    sort: bool = False  # sort rows by time (--sort); else rows out of order are refused
    epoch_unit: str | None = None  # integer epochs' unit (--epoch-unit)
    timezone: str | None = None  # the bars' clock, and the zone of wall-clock times without one (--timezone)
    time_format: str | None = None  # strptime form of the CSV's times (--time-format)
    decimal: str = "."  # the CSV's decimal point, "." or "," (--decimal)


@dataclass(frozen=True)
class Imported:
    bars: Bars
    provenance: dict[str, Any]


def import_bars(source: Path, options: ImportOptions) -> Imported:
    """Read, map, pick the instrument, turn times into instants, order and validate; DataError (one line) if any of it
    cannot be done for sure. A source without a volume column gives bars without volume."""
    read = read_source(source, options.columns, options.symbol, options.time_format, options.decimal,
                       options.timezone)  # times with UTC offsets need a timezone: source.py says which
    table, mapping, form = read.table, read.mapping, read.form
    del read  # the table is dropped a column at a time below: nothing else may hold it
    times = instants(str(source), mapping["timestamp"], table.column("timestamp"), options.epoch_unit,
                     options.timezone)
    values = {"volume": None}  # replaced where the source has volume
    for field in FIELDS:  # each column dropped once copied (Arrow's pool given back its pages): a peak near the
        if field not in table.column_names:  # columns' bytes plus one column
            continue  # volume, where the source has none
        if field != "timestamp":
            values[field] = _float_column(source, table.column(field), mapping[field], form)
        table = table.drop_columns([field])
        pa.default_memory_pool().release_unused()
    bars = Bars(path=str(source), timestamp=times.timestamp, **values, timezone=times.zone, epoch_unit=times.epoch_unit)
    bars = _in_time_order(bars, options.sort, mapping["timestamp"])
    validate_bars(bars)
    provenance = {
        "source": str(source.resolve()), "source_sha256": sha256_of(source), "form": form,
        "columns": mapping, "volume": bars.has_volume, "symbol": options.symbol, "timezone": times.zone,
        "epoch_unit": times.epoch_unit, "epoch_unit_assumed": times.assumed, "sorted": options.sort,
        "rows": len(bars), "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    return Imported(bars, provenance)


def _float_column(source: Path, column: pa.ChunkedArray, name: str, form: str) -> np.ndarray:
    """(n,) float64 of a price or volume column, whose empty cells are refused naming the first."""
    if (row := first_missing_row(column)) is not None:  # an empty cell, or a null spelling (NA, null, n/a...)
        line = f" (line {row + 2})" if form == "csv" else ""
        raise DataError(f"{source}: column {name!r} at row {row}{line} is empty, every bar needs all fields; drop "
                        "or fill that row")
    kind = column.type  # a CSV's are float64 already; a Parquet's may be anything
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind)):
        raise DataError(f"{source}: column {name!r} holds {kind}, prices and volume must be numbers; map a numeric "
                        "column with --column, or convert this one")
    return column.cast(pa.float64(), safe=False).to_numpy()  # integers past 2^53 round, as floats do


def write_canonical(imported: Imported, out: Path) -> None:
    """The canonical Parquet of `imported` at `out`, whole or not at all."""
    bars = imported.bars
    table = pa.table({"timestamp": pa.array(bars.timestamp, type=pa.timestamp("ns", tz=bars.timezone)),
                      **{field: pa.array(getattr(bars, field)) for field in bars.fields[1:]}})
    table = table.replace_schema_metadata({PROVENANCE_KEY: json.dumps(imported.provenance).encode()})
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)


def provenance_of(path: Path) -> dict[str, Any] | None:
    """The provenance an import wrote into `path`'s metadata; None for a file not written by `data import`."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[PROVENANCE_KEY]) if PROVENANCE_KEY in metadata else None


def _in_time_order(bars: Bars, sort: bool, name: str) -> Bars:
    """`bars` sorted by time when asked (stable: equal times keep their order, and are refused as duplicates);
    rows out of order are refused otherwise, naming the first."""
    late = np.flatnonzero(np.diff(bars.timestamp) < 0)
    if not len(late):
        return bars
    if not sort:
        row = int(late[0]) + 1
        raise DataError(f"{bars.path}: column {name!r} at row {row} is earlier than the row before, bars must be in "
                        "time order; pass --sort to sort them")
    order = np.argsort(bars.timestamp, kind="stable")
    return replace(bars, **{field: getattr(bars, field)[order] for field in bars.fields})
