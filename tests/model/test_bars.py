"""read_bars: every validation branch fails with its own one-line DataError; good files read back exactly."""

from __future__ import annotations

import decimal
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import DataError, bars_from_table, read_bars
from model.synth import synth_bars

N_BARS = 600
ROW = 7  # the row a test corrupts


def bar_columns(n=N_BARS, seed=0):
    """A valid bars table as {name: numpy array}; copies, so a test may corrupt them."""
    table = synth_bars(n, seed)
    columns = {name: table.column(name).to_numpy().copy() for name in table.column_names if name != "timestamp"}
    timestamp = table.column("timestamp").combine_chunks().view(pa.int64()).to_numpy().copy()
    return {"timestamp": timestamp, **columns}


def write_bars(path, columns=None, *, types=None, **changes):
    """Write bars to path; `changes` maps a column to (row, value) set before writing, `types` overrides arrow types."""
    columns = bar_columns() if columns is None else columns
    for name, (row, value) in changes.items():
        columns[name] = columns[name].astype(np.result_type(columns[name], type(value)))
        columns[name][row] = value
    types = {"timestamp": pa.timestamp("ns", tz="UTC"), **(types or {})}
    table = pa.table({name: pa.array(values, type=types.get(name)) for name, values in columns.items()})
    pq.write_table(table, path)
    return path


def bad_file(tmp_path, **changes):
    return write_bars(tmp_path / "bars.parquet", **changes)


def fails(path, message, columns=None):
    """read_bars raises DataError whose message starts with the file's path and contains `message`."""
    with pytest.raises(DataError, match=re.escape(f"{path}: ") + message) as info:
        read_bars(path, columns)
    assert "\n" not in str(info.value)  # one line


def test_read_bars_reads_a_valid_file_exactly(tmp_path):
    table = synth_bars(N_BARS, 3)
    path = tmp_path / "bars.parquet"
    pq.write_table(table, path)
    bars = read_bars(path)
    assert len(bars) == N_BARS
    assert bars.path == str(path)
    assert bars.timestamp.dtype == np.int64
    for name in ("open", "high", "low", "close", "volume"):
        got = getattr(bars, name)
        assert got.dtype == np.float64 and got.shape == (N_BARS,)
        torch.testing.assert_close(torch.from_numpy(got.copy()), torch.from_numpy(table.column(name).to_numpy().astype(np.float64)),
                                   rtol=0, atol=0)
    expected_ts = table.column("timestamp").combine_chunks().view(pa.int64()).to_numpy()
    np.testing.assert_array_equal(bars.timestamp, expected_ts)


def test_read_bars_missing_file(tmp_path):
    fails(tmp_path / "nope.parquet", r"no such file, the data must be an existing Parquet file")


def test_read_bars_directory(tmp_path):
    fails(tmp_path, r"is a directory, the data must be one Parquet file")


def test_read_bars_not_parquet(tmp_path):
    path = tmp_path / "bars.csv"
    path.write_text("timestamp,open,high,low,close,volume\n1,2,3,1,2,10\n")
    fails(path, r"not a Parquet file, or a truncated one \(.+\); a CSV, or bars of another layout: mamba-tune data "
                r"import .* --out bars.parquet")


def test_read_bars_truncated_file(tmp_path):
    path = bad_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    # The footer (schema) is gone, so this is reported by the schema read, not as "damaged or truncated".
    fails(path, r"not a Parquet file, or a truncated one \(.*magic bytes.*\); a CSV")


def test_read_bars_damaged_data_with_intact_footer(tmp_path):
    path = bad_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[8 : len(data) // 2] = bytes(len(data) // 2 - 8)  # zero the column chunks, keep magic bytes and footer
    path.write_bytes(bytes(data))
    fails(path, r"cannot read column .timestamp. \(.+\), the file is damaged; write it again")


def test_read_bars_empty_table(tmp_path):
    columns = {name: values[:0] for name, values in bar_columns().items()}
    path = write_bars(tmp_path / "empty.parquet", columns)
    fails(path, r"the file has no rows, bars are needed")


def test_read_bars_missing_column_lists_the_file_columns(tmp_path):
    columns = bar_columns()
    del columns["high"]
    path = write_bars(tmp_path / "bars.parquet", columns)
    fails(path, r"column 'high' \(high\) is missing, the file has timestamp, open, low, close, volume; "
                r"rename it or map it, e.g. --column high=<name>")


def test_read_bars_of_a_file_without_volume_gives_bars_without_volume(tmp_path):
    columns = bar_columns()
    del columns["volume"]
    path = write_bars(tmp_path / "bars.parquet", columns)
    bars = read_bars(path)
    assert bars.volume is None and not bars.has_volume and bars.fields == ("timestamp", "open", "high", "low", "close")
    for name in ("open", "high", "low", "close"):
        torch.testing.assert_close(torch.from_numpy(getattr(bars, name).copy()), torch.from_numpy(columns[name]))
    np.testing.assert_array_equal(bars.timestamp, columns["timestamp"])
    table = pa.table({k: v for k, v in columns.items() if k != "timestamp"})
    assert bars_from_table(table.append_column("timestamp", pa.array(columns["timestamp"], pa.timestamp("ns"))),
                           "frame").volume is None
    fails(path, r"column 'size' \(volume\) is missing", {"volume": "size"})  # a volume asked for must be there


def test_read_bars_non_numeric_price(tmp_path):
    columns = bar_columns()
    columns["high"] = columns["high"].astype(str)
    path = write_bars(tmp_path / "bars.parquet", columns)
    fails(path, r"column 'high' \(high\) has type string, it must be numeric")


def test_read_bars_timestamp_of_wrong_type(tmp_path):
    columns = bar_columns()
    columns["timestamp"] = columns["timestamp"].astype(np.float64)
    path = write_bars(tmp_path / "bars.parquet", columns, types={"timestamp": pa.float64()})
    fails(path, r"column 'timestamp' \(timestamp\) has type double, it must be a timestamp, date or integer")


@pytest.mark.parametrize("name", ["timestamp", "close", "volume"])
def test_read_bars_null_value(tmp_path, name):
    columns = bar_columns()
    mask = np.zeros(N_BARS, dtype=bool)
    mask[ROW] = True
    types = {"timestamp": pa.timestamp("ns", tz="UTC")}
    table = pa.table({k: pa.array(v, type=types.get(k), mask=mask if k == name else None) for k, v in columns.items()})
    path = tmp_path / "bars.parquet"
    pq.write_table(table, path)
    fails(path, rf"column '{name}' has a missing value at row {ROW}, every bar needs all fields")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ["open", "low", "volume"])
def test_read_bars_nan_or_inf(tmp_path, name, value):
    fails(bad_file(tmp_path, **{name: (ROW, value)}), rf"column '{name}' at row {ROW} is NaN or infinite")


@pytest.mark.parametrize(("name", "value"), [("low", 0.0), ("open", -1.0), ("close", -5000.0)])
def test_read_bars_non_positive_price(tmp_path, name, value):
    fails(bad_file(tmp_path, **{name: (ROW, value)}), rf"column '{name}' at row {ROW} is not positive, prices must be > 0")


def test_read_bars_negative_volume(tmp_path):
    fails(bad_file(tmp_path, volume=(ROW, -3)), rf"column 'volume' at row {ROW} is negative, volume must be >= 0")


def test_read_bars_high_below_low(tmp_path):
    low = bar_columns()["low"][ROW]
    fails(bad_file(tmp_path, high=(ROW, low - 0.25)), rf"column 'high' at row {ROW} is below low, high must be >= low")


def test_read_bars_accepts_a_flat_bar(tmp_path):
    columns = bar_columns()
    for name in ("open", "high", "low"):
        columns[name][ROW] = columns["close"][ROW]
    bars = read_bars(write_bars(tmp_path / "bars.parquet", columns))
    assert bars.high[ROW] == bars.low[ROW] == bars.open[ROW] == bars.close[ROW]


def test_read_bars_open_above_high(tmp_path):
    high = bar_columns()["high"][ROW]
    fails(bad_file(tmp_path, open=(ROW, high + 0.25)), rf"column 'open' at row {ROW} is outside \[low, high\]")


def test_read_bars_close_below_low(tmp_path):
    low = bar_columns()["low"][ROW]
    fails(bad_file(tmp_path, close=(ROW, low - 0.25)), rf"column 'close' at row {ROW} is outside \[low, high\]")


def test_read_bars_duplicate_timestamp(tmp_path):
    ts = bar_columns()["timestamp"]
    fails(bad_file(tmp_path, timestamp=(ROW, ts[ROW - 1])),
          rf"column 'timestamp' at row {ROW} equals the previous row's, timestamps must be strictly increasing")


def test_read_bars_unsorted_timestamps(tmp_path):
    columns = bar_columns()
    columns["timestamp"][[ROW, ROW + 1]] = columns["timestamp"][[ROW + 1, ROW]]
    path = write_bars(tmp_path / "bars.parquet", columns)
    fails(path, rf"column 'timestamp' at row {ROW + 1} is earlier than the previous row's, "
                r"timestamps must be strictly increasing; sort the file by time")


def test_read_bars_reports_the_first_offending_row(tmp_path):
    columns = bar_columns()
    columns["volume"][[40, 12, 300]] = -1
    fails(write_bars(tmp_path / "bars.parquet", columns), r"column 'volume' at row 12 is negative")


def test_read_bars_matches_column_names_case_insensitively(tmp_path):
    columns = bar_columns()
    renamed = dict(zip(["Timestamp", "Open", "HIGH", "low", "Close", "VoLuMe"], columns.values(), strict=True))
    path = tmp_path / "bars.parquet"
    pq.write_table(pa.table({k: pa.array(v, type=pa.timestamp("ns", tz="UTC") if k == "Timestamp" else None)
                             for k, v in renamed.items()}), path)
    bars = read_bars(path)
    np.testing.assert_array_equal(bars.timestamp, columns["timestamp"])
    np.testing.assert_array_equal(bars.high, columns["high"])
    np.testing.assert_array_equal(bars.volume, columns["volume"].astype(np.float64))


def test_read_bars_column_mapping_names_another_column(tmp_path):
    columns = bar_columns()
    columns = {"ts_event": columns.pop("timestamp"), **columns}
    path = write_bars(tmp_path / "bars.parquet", columns, types={"ts_event": pa.timestamp("ns", tz="UTC")})
    fails(path, r"column 'timestamp' \(timestamp\) is missing, the file has ts_event, open")
    bars = read_bars(path, {"timestamp": "ts_event"})
    np.testing.assert_array_equal(bars.timestamp, columns["ts_event"])


def test_read_bars_mapping_to_a_missing_column(tmp_path):
    path = bad_file(tmp_path)
    fails(path, r"column 'ts_event' \(timestamp\) is missing, the file has timestamp, open, high, low, close, volume",
          columns={"timestamp": "ts_event"})


def test_read_bars_mapping_of_an_unknown_field(tmp_path):
    path = bad_file(tmp_path)
    with pytest.raises(DataError, match=r"column mapping names 'price', which is not a bar field; map only "
                                        r"timestamp, open, high, low, close, volume"):
        read_bars(path, {"price": "close"})


def test_read_bars_timestamp_types_agree(tmp_path):
    n = 40
    days = np.arange(n, dtype=np.int64) + 19_723  # 2024-01-01 onwards, one bar a day
    ns = days * 86_400 * 10**9
    prices = {name: values[:n] for name, values in bar_columns().items() if name != "timestamp"}
    read = {}
    for label, array in {
        "ns_utc": pa.array(ns, type=pa.timestamp("ns", tz="UTC")),
        "us_utc": pa.array(ns // 1000, type=pa.timestamp("us", tz="UTC")),
        "ms_naive": pa.array(ns // 10**6, type=pa.timestamp("ms")),
        "date32": pa.array(days.astype(np.int32), type=pa.date32()),
        "int64": pa.array(ns, type=pa.int64()),
    }.items():
        path = tmp_path / f"{label}.parquet"
        pq.write_table(pa.table({"timestamp": array, **prices}), path)
        read[label] = read_bars(path).timestamp
    for label, timestamp in read.items():
        assert timestamp.dtype == np.int64, label
        np.testing.assert_array_equal(timestamp, ns, err_msg=label)


def test_read_bars_integer_and_float32_columns_become_float64(tmp_path):
    columns = bar_columns()
    assert columns["volume"].dtype == np.int64  # synth writes integer volume
    columns["volume"] = columns["volume"].astype(np.int32)
    columns["close"] = columns["close"].astype(np.float32)
    path = write_bars(tmp_path / "bars.parquet", columns)
    bars = read_bars(path)
    assert bars.volume.dtype == np.float64 and bars.close.dtype == np.float64
    torch.testing.assert_close(torch.from_numpy(bars.volume.copy()), torch.from_numpy(columns["volume"].astype(np.float64)),
                               rtol=0, atol=0)
    torch.testing.assert_close(torch.from_numpy(bars.close.copy()), torch.from_numpy(columns["close"].astype(np.float64)),
                               rtol=0, atol=0)


def test_read_bars_decimal_prices_become_float64(tmp_path):
    columns = bar_columns()
    close = pa.array([decimal.Decimal(f"{x:.2f}") for x in columns["close"]], type=pa.decimal128(10, 2))
    table = pa.table({**{k: pa.array(v) for k, v in columns.items()}, "close": close})
    table = table.set_column(0, "timestamp", pa.array(columns["timestamp"], type=pa.timestamp("ns", tz="UTC")))
    path = tmp_path / "bars.parquet"
    pq.write_table(table, path)
    assert pq.read_schema(path).field("close").type == pa.decimal128(10, 2)
    bars = read_bars(path)
    assert bars.close.dtype == np.float64
    torch.testing.assert_close(torch.from_numpy(bars.close.copy()), torch.from_numpy(columns["close"]), rtol=0, atol=0)


def test_read_bars_two_fields_mapped_to_one_column(tmp_path):
    path = write_bars(tmp_path / "bars.parquet", bar_columns())
    with pytest.raises(DataError, match=r"fields open and close both map to column 'close', each field needs its own"):
        read_bars(path, {"open": "close"})


def test_read_bars_timestamp_beyond_nanosecond_range(tmp_path):
    columns = bar_columns()
    stamps = (columns["timestamp"] // 1000).astype("int64")  # microseconds
    stamps[ROW] = 253_402_214_400_000_000  # 9999-12-31, a placeholder date
    columns["timestamp"] = stamps
    path = write_bars(tmp_path / "bars.parquet", columns, types={"timestamp": pa.timestamp("us", tz="UTC")})
    with pytest.raises(DataError, match=rf"column 'timestamp' at row {ROW} is outside the range of nanosecond"):
        read_bars(path)


def test_bars_from_table_reads_a_dataframe_as_read_bars_reads_its_file(tmp_path):
    table = synth_bars(N_BARS, 3)
    pq.write_table(table, tmp_path / "bars.parquet")
    from_file = read_bars(tmp_path / "bars.parquet")
    frame = table.to_pandas()
    frame["timestamp"] = frame["timestamp"].dt.tz_localize(None)  # naive datetimes count as UTC
    bars = bars_from_table(pa.Table.from_pandas(frame, preserve_index=False), "frame")
    assert bars.path == "frame"
    for name in ("timestamp", "open", "high", "low", "close", "volume"):
        np.testing.assert_array_equal(getattr(bars, name), getattr(from_file, name))


def test_bars_from_table_errors_name_the_source():
    columns = bar_columns()
    columns["close"][ROW] = columns["high"][ROW] + 1
    table = pa.table({**columns, "timestamp": pa.array(columns["timestamp"], type=pa.timestamp("ns"))})
    with pytest.raises(DataError, match=rf"^bars: column 'close' at row {ROW} is outside \[low, high\]"):
        bars_from_table(table, "bars")
    with pytest.raises(DataError, match=r"^bars: there are no rows, bars are needed"):
        bars_from_table(table.slice(0, 0), "bars")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_read_bars_integer_epochs_are_read_in_the_one_unit_that_fits(tmp_path, unit):
    columns = bar_columns()
    ns = columns["timestamp"].astype(np.int64)
    columns["timestamp"] = ns // {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    bars = read_bars(write_bars(tmp_path / "bars.parquet", columns, types={"timestamp": pa.int64()}))
    assert bars.epoch_unit == unit and bars.timezone == "UTC"
    np.testing.assert_array_equal(bars.timestamp, ns // 10**9 * 10**9 if unit == "s" else ns)


@pytest.mark.parametrize("stamps", [np.arange(N_BARS, dtype=np.int64) + 1,  # 1970 in any unit: none is assumed
                                    np.arange(N_BARS, dtype=np.int64) * 10**11 + 1_700_000_000])  # s into ms
def test_read_bars_integer_epochs_no_unit_fits_are_refused_with_the_flag(tmp_path, stamps):
    columns = {**bar_columns(), "timestamp": stamps}
    path = write_bars(tmp_path / "bars.parquet", columns, types={"timestamp": pa.int64()})
    with pytest.raises(DataError, match=rf"column 'timestamp' holds integers {stamps[0]:,} .. {stamps[-1]:,}, which no "
                                        r"epoch unit \(s, ms, us, ns\) puts within 1971-2100, .*--epoch-unit s\|ms\|us\|ns"):
        read_bars(path)


def test_read_bars_keeps_the_zone_of_the_timestamps_as_the_bars_clock(tmp_path):
    columns = bar_columns()
    zoned = write_bars(tmp_path / "ny.parquet", columns, types={"timestamp": pa.timestamp("ns", tz="America/New_York")})
    naive = write_bars(tmp_path / "naive.parquet", columns, types={"timestamp": pa.timestamp("ns")})
    ny, utc = read_bars(zoned), read_bars(naive)
    assert (ny.timezone, utc.timezone) == ("America/New_York", "UTC")
    np.testing.assert_array_equal(ny.timestamp, utc.timestamp)  # the same instants: the zone is the clock, not a shift


def test_read_bars_bars_of_several_instruments_are_refused_naming_them(tmp_path):
    columns = bar_columns()
    two = pa.array(["NQ", "ES"] * (N_BARS // 2))
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({**{k: pa.array(v) for k, v in columns.items()}, "Symbol": two}), path)
    with pytest.raises(DataError, match=r"column 'Symbol' names 2 instruments \(ES, NQ\), bars must be of one "
                                        r"instrument; pick one: mamba-tune data import .* --symbol ES"):
        read_bars(path)
    one = tmp_path / "one.parquet"
    pq.write_table(pa.table({**{k: pa.array(v) for k, v in columns.items()}, "symbol": pa.array(["ES"] * N_BARS)}), one)
    assert len(read_bars(one)) == N_BARS
