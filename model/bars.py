"""OHLCV bars from Parquet, read with pyarrow and validated before anything trains.

Every failure is a `DataError` whose one-line message names the file, the column and
the first offending row, says the rule, and says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from model.errors import InputError

FIELDS = ("timestamp", "open", "high", "low", "close", "volume")
PRICES = ("open", "high", "low", "close")


class DataError(InputError, ValueError):
    """Bad input data: one line, `<what>, <rule>, <fix>`."""


@dataclass(frozen=True)
class Bars:
    """Validated bars: timestamp as int64 nanoseconds since the epoch (UTC), the rest float64.

    All arrays have shape (n_bars,).
    """

    path: str
    timestamp: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray

    def __len__(self) -> int:
        return len(self.close)


def read_bars(path: str | Path, columns: dict[str, str] | None = None) -> Bars:
    """Read and validate a Parquet file of bars.

    columns maps our field names (timestamp, open, high, low, close, volume) to the file's
    column names, e.g. {"timestamp": "ts_event"}; other names are matched case-insensitively.
    """
    path = Path(path)
    parquet = _open(path)
    mapping = _resolve_columns(path, parquet.schema_arrow, columns or {})
    if parquet.metadata.num_rows == 0:
        raise DataError(f"{path}: the file has no rows, bars are needed; point --data at a file with bars")
    arrays = {}
    for field, name in mapping.items():  # a column at a time: only one Arrow copy is alive at once
        try:
            column = parquet.read(columns=[name]).column(0)
        except (pa.ArrowException, OSError) as exc:
            raise DataError(f"{path}: cannot read column {name!r} ({_first_line(exc)}), the file is damaged; "
                            "write it again") from None
        arrays[field] = _column(path, column, field, name)
        del column
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise
    bars = Bars(path=str(path), **arrays)
    _validate(bars)
    return bars


def bars_from_table(table: pa.Table, source: str, columns: dict[str, str] | None = None) -> Bars:
    """Validate bars already in memory (e.g. `pa.Table.from_pandas(frame)`) as read_bars does a file.

    source names the bars in every error message (where read_bars names the file).
    """
    where = Path(source)
    mapping = _resolve_columns(where, table.schema, columns or {})
    if table.num_rows == 0:
        raise DataError(f"{source}: there are no rows, bars are needed; pass at least one bar")
    bars = Bars(path=source, **{field: _column(where, table.column(name), field, name)
                                for field, name in mapping.items()})
    _validate(bars)
    return bars


def _open(path: Path) -> pq.ParquetFile:
    if not path.exists():
        raise DataError(f"{path}: no such file, the data must be an existing Parquet file; check the path "
                        "(or make one with `mamba-tune data synth --out PATH`)")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, the data must be one Parquet file; name the file")
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a Parquet file, or a truncated one ({_first_line(exc)}); write it as "
                        "Parquet again (e.g. pyarrow.parquet.write_table)") from None


def _resolve_columns(path: Path, schema: pa.Schema, columns: dict[str, str]) -> dict[str, str]:
    """Our field -> the file's column name; unknown fields and missing columns are errors."""
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise DataError(f"column mapping names {unknown[0]!r}, which is not a bar field; map only "
                        f"{', '.join(FIELDS)} (e.g. timestamp=ts_event)")
    by_lower = {name.lower(): name for name in schema.names}
    resolved = {}
    for field in FIELDS:
        wanted = columns.get(field, field)
        name = wanted if wanted in schema.names else by_lower.get(wanted.lower())
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


def _column(path: Path, column: pa.ChunkedArray, field: str, name: str) -> np.ndarray:
    """One column as a numpy array: int64 ns for the timestamp, float64 for the rest."""
    if column.null_count:
        row = int(pc.index(pc.is_null(column), True).as_py())
        raise DataError(f"{path}: column {name!r} has a missing value at row {row}, every bar needs all "
                        "fields; drop or fill that row")
    kind = column.type
    if field == "timestamp":
        return _timestamp_ns(path, name, column)
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind)):
        raise DataError(f"{path}: column {name!r} ({field}) has type {kind}, it must be numeric; "
                        "convert it to float")
    if pa.types.is_float64(kind):
        return column.to_numpy()  # one copy, joining the chunks
    return column.cast(pa.float64(), safe=False).to_numpy()  # integers past 2^53 round, as floats do


def _timestamp_ns(path: Path, name: str, column: pa.ChunkedArray) -> np.ndarray:
    """A timestamp, date or integer column as int64 nanoseconds since the epoch."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        target = pa.timestamp("ns", tz=kind.tz)
    elif pa.types.is_date(kind):
        target = pa.timestamp("ns")
    elif pa.types.is_integer(kind):
        target = pa.int64()
    else:
        raise DataError(f"{path}: column {name!r} (timestamp) has type {kind}, it must be a timestamp, "
                        "date or integer epoch nanoseconds; convert it")
    try:
        converted = column.cast(target)
    except pa.ArrowInvalid:
        raise DataError(f"{path}: column {name!r} at row {_first_out_of_range(column)} is outside the range of "
                        "nanosecond timestamps (years 1677-2262), timestamps must fit; fix or drop that row") from None
    values = converted.to_numpy()
    return values.view(np.int64) if values.dtype.kind == "M" else values.astype(np.int64, copy=False)


def _first_out_of_range(column: pa.ChunkedArray) -> int:
    """Row of the first value that int64 nanoseconds cannot hold."""
    column = column.combine_chunks()
    kind = column.type
    if pa.types.is_integer(kind):
        values = column.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        return int(np.argmax(np.abs(values) >= 2.0**63))
    if pa.types.is_timestamp(kind):
        ns_per_unit = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[kind.unit]
        raw = column.view(pa.int64()).to_numpy(zero_copy_only=False)
    else:  # date32 counts days, date64 milliseconds
        ns_per_unit = 86_400 * 10**9 if pa.types.is_date32(kind) else 10**6
        raw = column.view(pa.int32() if pa.types.is_date32(kind) else pa.int64()).to_numpy(zero_copy_only=False)
    return int(np.argmax(np.abs(raw.astype(np.float64)) * ns_per_unit >= 2.0**63))


def _validate(bars: Bars) -> None:
    """Each rule in turn; the first broken one raises, naming its first offending row."""
    path = bars.path
    for field in ("open", "high", "low", "close", "volume"):
        _fail_at(path, field, ~np.isfinite(getattr(bars, field)), "is NaN or infinite",
                 "every value must be finite; drop or fill that row")
    for field in PRICES:
        _fail_at(path, field, getattr(bars, field) <= 0, "is not positive", "prices must be > 0; fix or drop that row")
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
