"""OHLCV bars from Parquet, read with pyarrow and validated before anything trains.

Volume is optional: bars without a volume column (FX, indices) have none (Bars.volume is None), and the features
that need it are left out (model/features.py). Every failure is a `DataError` whose one-line message names the file,
the column and the first offending row, says the rule, and says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from model.bar_times import UTC, epoch_unit_of, epochs_to_ns
from model.bars_location import bars_location, is_remote, open_object
from model.errors import InputError

FIELDS = ("timestamp", "open", "high", "low", "close", "volume")
OPTIONAL_FIELDS = ("volume",)  # a file without this column has none (unless the column mapping names one)
PRICES = ("open", "high", "low", "close")
SYMBOL_COLUMNS = ("symbol", "ticker", "instrument")  # a column naming each bar's instrument (any case)


class DataError(InputError, ValueError):
    """Bad input data: one line, `<what>, <rule>, <fix>`."""


@dataclass(frozen=True)
class Bars:
    """Validated bars: timestamp as int64 nanoseconds since the epoch (UTC), the rest float64.

    All arrays have shape (n_bars,). volume is None for bars without volume (a file without a volume column):
    nothing stands in for it, so no consumer can read a made-up volume. timezone is the bars' clock
    (model/bar_times.py), the zone time-of-day features read; epoch_unit, the unit integer timestamps were read in
    (None: the file held timestamps).
    """

    path: str
    timestamp: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray | None
    timezone: str = UTC
    epoch_unit: str | None = None

    def __len__(self) -> int:
        return len(self.close)

    @property
    def has_volume(self) -> bool:
        return self.volume is not None

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields these bars have: FIELDS, less volume for bars without it."""
        return FIELDS if self.has_volume else tuple(f for f in FIELDS if f != "volume")


def read_bars(path: str | Path, columns: dict[str, str] | None = None) -> Bars:
    """Read and validate a Parquet file of bars: a path, or an s3:// or gs:// URI (model/bars_location.py).

    columns maps our field names (timestamp, open, high, low, close, volume) to the file's
    column names, e.g. {"timestamp": "ts_event"}; other names are matched case-insensitively. A file without a
    volume column (and no mapping naming one) gives bars without volume.
    """
    path = bars_location(path)
    parquet = _open(path)
    mapping = _resolve_columns(path, parquet.schema_arrow, columns or {})
    if parquet.metadata.num_rows == 0:
        raise DataError(f"{path}: the file has no rows, bars are needed; point --data at a file with bars")
    if (symbol := _symbol_column(parquet.schema_arrow, mapping)) is not None:
        _require_one_instrument(path, symbol, _read(path, parquet, symbol))
    arrays, times = {}, {}
    for field, name in mapping.items():  # a column at a time: only one Arrow copy is alive at once
        column = _read(path, parquet, name)
        if field == "timestamp":
            arrays[field], times = _timestamp_ns(path, name, column)
        else:
            arrays[field] = _column(path, column, field, name)
        del column
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise
    bars = Bars(path=str(path), **{"volume": None, **arrays}, **times)
    validate_bars(bars)
    return bars


def bars_from_table(table: pa.Table, source: str, columns: dict[str, str] | None = None) -> Bars:
    """Validate bars already in memory (e.g. `pa.Table.from_pandas(frame)`) as read_bars does a file.

    source names the bars in every error message (where read_bars names the file).
    """
    where = Path(source)
    mapping = _resolve_columns(where, table.schema, columns or {})
    if table.num_rows == 0:
        raise DataError(f"{source}: there are no rows, bars are needed; pass at least one bar")
    if (symbol := _symbol_column(table.schema, mapping)) is not None:
        _require_one_instrument(where, symbol, table.column(symbol))
    timestamp, times = _timestamp_ns(where, mapping["timestamp"], table.column(mapping["timestamp"]))
    values = {field: _column(where, table.column(name), field, name)
              for field, name in mapping.items() if field != "timestamp"}
    bars = Bars(path=source, timestamp=timestamp, **times, **{"volume": None, **values})
    validate_bars(bars)
    return bars


def _open(path: str | Path) -> pq.ParquetFile:
    if is_remote(path):
        return _parquet(path, open_object(path), "upload one made with `mamba-tune data import FILE --out "
                        "bars.parquet`")
    if not path.exists():
        raise DataError(f"{path}: no such file, the data must be an existing Parquet file; check the path "
                        "(or make one with `mamba-tune data synth --out PATH`)")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, the data must be one Parquet file; name the file")
    return _parquet(path, path, f"mamba-tune data import {path} --out bars.parquet")


def _parquet(path: str | Path, source: Path | pa.NativeFile, importer: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(source)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a Parquet file, or a truncated one ({_first_line(exc)}); a CSV, or bars of "
                        f"another layout: {importer}") from None


def _read(path: str | Path, parquet: pq.ParquetFile, name: str) -> pa.ChunkedArray:
    try:
        return parquet.read(columns=[name]).column(0)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: cannot read column {name!r} ({_first_line(exc)}), the file is damaged; "
                        "write it again") from None


def _symbol_column(schema: pa.Schema, mapping: dict[str, str]) -> str | None:
    """The file's column naming each bar's instrument (SYMBOL_COLUMNS, any case), if it has one."""
    names = [n for n in schema.names if n.lower() in SYMBOL_COLUMNS and n not in mapping.values()]
    return names[0] if names else None


def _require_one_instrument(path: str | Path, name: str, column: pa.ChunkedArray) -> None:
    """Bars are of one instrument: a symbol column with several values is refused, naming them."""
    symbols = sorted(str(s) for s in pc.unique(column).to_pylist() if s is not None)
    if len(symbols) > 1:
        shown = ", ".join(symbols[:10]) + (f" and {len(symbols) - 10} more" if len(symbols) > 10 else "")
        raise DataError(f"{path}: column {name!r} names {len(symbols)} instruments ({shown}), bars must be of one "
                        f"instrument; pick one: mamba-tune data import {path} --out bars.parquet --symbol {symbols[0]}")


def _resolve_columns(path: str | Path, schema: pa.Schema, columns: dict[str, str]) -> dict[str, str]:
    """Our field -> the file's column name; unknown fields and missing columns are errors, except an optional
    field's (volume) that the mapping does not name: it is left out."""
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise DataError(f"column mapping names {unknown[0]!r}, which is not a bar field; map only "
                        f"{', '.join(FIELDS)} (e.g. timestamp=ts_event)")
    by_lower = {name.lower(): name for name in schema.names}
    resolved = {}
    for field in FIELDS:
        wanted = columns.get(field, field)
        name = wanted if wanted in schema.names else by_lower.get(wanted.lower())
        if name is None and field in OPTIONAL_FIELDS and field not in columns:
            continue
        if name is None:
            raise DataError(f"{path}: column {wanted!r} ({field}) is missing, the file has "
                            f"{', '.join(schema.names) or 'no columns'}; rename it or map it, e.g. "
                            f"--column {field}=<name>")
        resolved[field] = name
    shared = [name for name in set(resolved.values()) if list(resolved.values()).count(name) > 1]
    if shared:
        fields = [f for f, name in resolved.items() if name == shared[0]]
        raise DataError(f"{path}: fields {' and '.join(fields)} both map to column {shared[0]!r}, each field needs "
                        "its own column; fix the --column mapping")
    return resolved


def first_missing_row(column: pa.ChunkedArray) -> int | None:
    """The first row whose value is missing (null); None if none is."""
    return int(pc.index(pc.is_null(column), True).as_py()) if column.null_count else None


def _column(path: str | Path, column: pa.ChunkedArray, field: str, name: str) -> np.ndarray:
    """One column as a numpy array: float64."""
    if (row := first_missing_row(column)) is not None:
        raise DataError(f"{path}: column {name!r} has a missing value at row {row}, every bar needs all "
                        "fields; drop or fill that row")
    kind = column.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind)):
        raise DataError(f"{path}: column {name!r} ({field}) has type {kind}, it must be numeric; "
                        "convert it to float")
    if pa.types.is_float64(kind):
        return column.to_numpy()  # one copy, joining the chunks
    return column.cast(pa.float64(), safe=False).to_numpy()  # integers past 2^53 round, as floats do


def _timestamp_ns(path: str | Path, name: str, column: pa.ChunkedArray) -> tuple[np.ndarray, dict[str, str | None]]:
    """A timestamp, date or integer epoch column -> (n,) int64 ns since the epoch, and the Bars fields it sets:
    timezone (the column's zone; UTC for one without) and epoch_unit (integers: the one unit that fits)."""
    if (row := first_missing_row(column)) is not None:
        raise DataError(f"{path}: column {name!r} has a missing value at row {row}, every bar needs all "
                        "fields; drop or fill that row")
    kind = column.type
    if pa.types.is_integer(kind):
        return _epoch_ns(path, name, column)
    if pa.types.is_timestamp(kind):
        target, zone = pa.timestamp("ns", tz=kind.tz), kind.tz or UTC
    elif pa.types.is_date(kind):
        target, zone = pa.timestamp("ns"), UTC
    else:
        raise DataError(f"{path}: column {name!r} (timestamp) has type {kind}, it must be a timestamp, date or "
                        f"integer epoch; convert it: mamba-tune data import {path} --out bars.parquet")
    try:
        converted = column.cast(target)
    except pa.ArrowInvalid:
        raise DataError(f"{path}: column {name!r} at row {_first_out_of_range(column)} is outside the range of "
                        "nanosecond timestamps (years 1677-2262), timestamps must fit; fix or drop that row") from None
    values = converted.to_numpy()
    return values.view(np.int64), {"timezone": zone, "epoch_unit": None}


def _epoch_ns(path: str | Path, name: str, column: pa.ChunkedArray) -> tuple[np.ndarray, dict[str, str | None]]:
    """Integer epochs in the only unit that puts every one within EPOCH_YEARS; refused when none does."""
    counts = column.to_numpy().astype(np.int64, copy=False)
    try:
        unit = epoch_unit_of(counts)
    except ValueError as exc:
        raise DataError(f"{path}: column {name!r} {exc}; give its unit: mamba-tune data import {path} --out "
                        "bars.parquet --epoch-unit s|ms|us|ns") from None
    return epochs_to_ns(counts, unit), {"timezone": UTC, "epoch_unit": unit}


def _first_out_of_range(column: pa.ChunkedArray) -> int:
    """Row of the first value that int64 nanoseconds cannot hold."""
    column = column.combine_chunks()
    kind = column.type
    if pa.types.is_timestamp(kind):
        ns_per_unit = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[kind.unit]
        raw = column.view(pa.int64()).to_numpy(zero_copy_only=False)
    else:  # date32 counts days, date64 milliseconds
        ns_per_unit = 86_400 * 10**9 if pa.types.is_date32(kind) else 10**6
        raw = column.view(pa.int32() if pa.types.is_date32(kind) else pa.int64()).to_numpy(zero_copy_only=False)
    return int(np.argmax(np.abs(raw.astype(np.float64)) * ns_per_unit >= 2.0**63))


def validate_bars(bars: Bars) -> None:
    """Each rule in turn (volume's only for bars with volume); the first broken one raises, naming its first
    offending row."""
    path = bars.path
    for field in bars.fields[1:]:
        _fail_at(path, field, ~np.isfinite(getattr(bars, field)), "is NaN or infinite",
                 "every value must be finite; drop or fill that row")
    for field in PRICES:
        _fail_at(path, field, getattr(bars, field) <= 0, "is not positive", "prices must be > 0; fix or drop that row")
    if bars.has_volume:
        _fail_at(path, "volume", bars.volume < 0, "is negative", "volume must be >= 0; fix or drop that row")
    _fail_at(path, "high", bars.high < bars.low, "is below low", "high must be >= low; fix or drop that row")
    for field in ("open", "close"):
        value = getattr(bars, field)
        _fail_at(path, field, (value > bars.high) | (value < bars.low), "is outside [low, high]",
                 f"{field} must lie within the bar's range; fix or drop that row")
    step = np.diff(bars.timestamp)
    _fail_at(path, "timestamp", np.concatenate([[False], step == 0]), "equals the previous row's",
             "timestamps must be strictly increasing; drop the duplicate bar")
    _fail_at(path, "timestamp", np.concatenate([[False], step < 0]), "is earlier than the previous row's",
             "timestamps must be strictly increasing; sort the file by time")


def _fail_at(path: str, field: str, bad: np.ndarray, what: str, rule_and_fix: str) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        raise DataError(f"{path}: column {field!r} at row {row} {what}, {rule_and_fix}")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
