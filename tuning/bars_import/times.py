"""The timestamp column as instants (int64 ns since the epoch) and the zone of the bars' clock.

    integers             epochs: in --epoch-unit, else the one unit that puts all in 1971-2100 (model/bar_times.py)
    zoned timestamps     instants (Parquet with a zone; CSV text with a UTC offset: 2024-03-08T09:30:00-05:00)
    naive timestamps     wall-clock times in --timezone (default UTC); one that a daylight-saving change makes
    and dates            ambiguous (it happens twice) or nonexistent (skipped) is refused, naming its row
The zone is --timezone (a zone of the database, or a fixed offset: +09:00), else the file's own (Parquet), else UTC.
CSV offsets other than UTC's name no zone (an offset is not a daylight-saving rule), so they need --timezone
(source.py says which: the one offset every row carries, else the market's zone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from model.bar_times import UTC, epoch_unit_of, epochs_to_ns, local_clock_ns
from model.bars import DataError, first_missing_row


@dataclass(frozen=True)
class Instants:
    """timestamp: (n,) int64 ns since the epoch; zone: the bars' clock; epoch_unit: the unit integers were read in
    (None: the file held times); assumed: the unit was inferred, not given."""

    timestamp: np.ndarray
    zone: str
    epoch_unit: str | None = None
    assumed: bool = False


def instants(source: str, name: str, column: pa.ChunkedArray, epoch_unit: str | None, timezone: str | None) -> Instants:
    """The column `name` of `source` as instants; DataError (one line) where they cannot be told for sure."""
    if (row := first_missing_row(column)) is not None:
        raise DataError(f"{source}: column {name!r} has a missing value at row {row}, every bar needs a time; drop or "
                        "fill that row")
    kind = column.type
    if pa.types.is_integer(kind):
        return _epochs(source, name, column.to_numpy().astype(np.int64, copy=False), epoch_unit, timezone)
    if epoch_unit is not None:
        raise DataError(f"--epoch-unit {epoch_unit}: column {name!r} of {source} holds {kind}, not integers, a unit "
                        "applies to integer epochs only; leave --epoch-unit out")
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        ns = column.cast(pa.timestamp("ns", tz=kind.tz), safe=False).to_numpy().view(np.int64)
        return Instants(ns, timezone or kind.tz)
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return Instants(_wall_clock(source, name, column.cast(pa.timestamp("ns")), timezone or UTC), timezone or UTC)
    raise DataError(f"{source}: column {name!r} (timestamp) holds {kind}, a Parquet file's times must be timestamps, "
                    "dates or integer epochs; convert the column (e.g. pandas.to_datetime), or export the bars as CSV")


def _epochs(source: str, name: str, counts: np.ndarray, unit: str | None, timezone: str | None) -> Instants:
    if unit is None:
        try:
            assumed = epoch_unit_of(counts)
        except ValueError as exc:
            raise DataError(f"{source}: column {name!r} {exc}; give it: --epoch-unit s|ms|us|ns") from None
        return Instants(epochs_to_ns(counts, assumed), timezone or UTC, assumed, assumed=True)
    low, high = int(counts.min()), int(counts.max())
    try:
        return Instants(epochs_to_ns(counts, unit), timezone or UTC, unit)
    except ValueError as exc:
        raise DataError(f"{source}: column {name!r} holds {low:,} .. {high:,}, as epoch {unit} {exc}; give the unit "
                        "they are counted in with --epoch-unit") from None


def _wall_clock(source: str, name: str, naive: pa.ChunkedArray, zone: str) -> np.ndarray:
    """Wall-clock times in `zone` -> instants, ns; a time the zone's clock shows twice, or never, is refused."""
    if zone == UTC:
        return naive.to_numpy().view(np.int64)
    earliest = pc.assume_timezone(naive, zone, ambiguous="earliest", nonexistent="earliest")
    latest = pc.assume_timezone(naive, zone, ambiguous="latest", nonexistent="latest")
    unclear = pc.not_equal(earliest, latest)
    if pc.any(unclear).as_py():
        row = int(pc.index(unclear, True).as_py())
        shown = str(naive[row].as_py())
        stamp = earliest.to_numpy().view(np.int64)[row:row + 1]
        twice = local_clock_ns(stamp, zone)[0] == naive.to_numpy().view(np.int64)[row]
        what = "happens twice there (daylight saving ends)" if twice else "never happens there (daylight saving starts)"
        raise DataError(f"{source}: column {name!r} at row {row} is {shown}, which {what} in {zone}, a wall-clock time "
                        "must name one instant; export the times in UTC or with their UTC offset")
    return earliest.to_numpy().view(np.int64)
