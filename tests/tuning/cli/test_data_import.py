"""`mamba-tune data import` as a user runs it: real CSV and Parquet files of the S&P 500 daily bars the arch package
ships, written in the layouts users export; each bad input is one line, exit 2, and nothing written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import read_bars
from model.features import bar_features
from tests.bars import YAHOO_HEADER as HEADER
from tests.bars import write_csv, yahoo_rows
from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import write_space
from tuning.bars_file import sha256_of
from tuning.cli.data import arch_daily_bars

NS_PER_DAY = 86_400 * 10**9


@pytest.fixture(scope="module")
def sp500() -> pa.Table:
    return arch_daily_bars("sp500")  # timestamp (UTC midnights), open, high, low, close, volume


def imported(*args: object) -> subprocess.CompletedProcess:
    done = run_cli("data", "import", *args)
    assert done.returncode == 0, done.stderr
    return done


def test_import_of_a_yahoo_csv_writes_canonical_bars_with_their_provenance(tmp_path, sp500):
    source = write_csv(tmp_path / "SPX.csv", yahoo_rows(sp500))
    out = tmp_path / "spx.parquet"
    done = imported(source, "--out", out)
    assert f"wrote 5,031 bars to {out} (from {source}, csv: timestamp=Date, open=Open, high=High, low=Low, " \
           "close=Close, volume=Volume)" in done.stdout  # Close, not Adj Close: the one within each bar's range
    bars = read_bars(out)
    expected = read_bars_of(sp500, tmp_path)
    for field in ("timestamp", "open", "high", "low", "close", "volume"):
        torch.testing.assert_close(torch.from_numpy(getattr(bars, field).copy()),
                                   torch.from_numpy(getattr(expected, field).copy()), rtol=0, atol=0)
    schema = pq.read_schema(out)
    assert schema.field("timestamp").type == pa.timestamp("ns", tz="UTC") and bars.timezone == "UTC"
    provenance = json.loads(schema.metadata[b"mamba_tune.provenance"])
    assert {k: provenance[k] for k in ("source", "source_sha256", "form", "columns", "timezone", "rows")} == {
        "source": str(source.resolve()), "source_sha256": sha256_of(source), "form": "csv", "timezone": "UTC",
        "columns": {"timestamp": "Date", "open": "Open", "high": "High", "low": "Low", "close": "Close",
                    "volume": "Volume"}, "rows": 5031}
    check = run_cli("data", "check", out)
    assert check.returncode == 0 and f"imported from {source.resolve()} (csv, SHA-256 {sha256_of(source)[:16]})" \
        in check.stdout, check.stdout + check.stderr


def read_bars_of(table: pa.Table, folder: Path):
    pq.write_table(table, folder / "expected.parquet")
    return read_bars(folder / "expected.parquet")


def test_integer_epoch_milliseconds_are_read_as_the_dates_they_are_or_refused(tmp_path, sp500):
    ns = sp500.column("timestamp").to_numpy().astype("datetime64[ns]").view(np.int64)
    millis = tmp_path / "millis.parquet"
    pq.write_table(sp500.set_column(0, "timestamp", pa.array(ns // 10**6)), millis)
    assert read_bars(millis).epoch_unit == "ms"  # data check, sweep and train read it right as it is
    np.testing.assert_array_equal(read_bars(millis).timestamp, ns)
    done = imported(millis, "--out", tmp_path / "out.parquet")
    assert "timestamps    integer epoch milliseconds (the one unit that puts every bar in 1971-2100)" in done.stdout
    assert "time span     1999-01-04 00:00:00 .. 2018-12-31 00:00:00 (UTC)" in done.stdout
    np.testing.assert_array_equal(read_bars(tmp_path / "out.parquet").timestamp, ns)
    seconds = tmp_path / "seconds.parquet"  # given in the wrong unit: the dates come out in 1970, never silently
    pq.write_table(sp500.set_column(0, "timestamp", pa.array(ns // 10**9 - 900_000_000)), seconds)
    assert_one_line_error(run_cli("data", "import", seconds, "--out", tmp_path / "s.parquet"),
                          f"{seconds}: column 'timestamp' holds integers 15,408,000 .. 646,214,400, which no epoch "
                          "unit (s, ms, us, ns) puts within 1971-2100")
    assert_one_line_error(run_cli("data", "check", seconds), f"{seconds}: column 'timestamp' holds integers")
    given = imported(seconds, "--out", tmp_path / "s.parquet", "--epoch-unit", "s")  # said so: read as said
    assert "timestamps    integer epoch seconds (--epoch-unit)" in given.stdout


def test_one_instrument_is_kept_of_several_and_rows_are_sorted_when_asked(tmp_path, sp500):
    rows = yahoo_rows(sp500)
    both = write_csv(tmp_path / "both.csv", [f"{r},ES" for r in rows[::-1]] + [f"{r},NQ" for r in rows[:2000]],
                     header=HEADER + ",Ticker")
    out = tmp_path / "es.parquet"
    done = imported(both, "--out", out, "--symbol", "ES", "--sort")
    assert "symbol=Ticker" in done.stdout and len(read_bars(out)) == 5031
    np.testing.assert_array_equal(read_bars(out).close, read_bars_of(sp500, tmp_path).close)


def test_wall_clock_times_are_taken_in_the_market_zone_whose_clock_the_features_read(tmp_path, sp500):
    """5-minute bars of New York sessions, exported as wall-clock times without a zone, across the change to
    daylight saving time on 2024-03-10: 09:30 is 14:30 UTC before it and 13:30 after."""
    prices = [row.split(",", 1)[1] for row in yahoo_rows(sp500)]  # a bar's prices: any valid ones will do
    days = np.arange(np.datetime64("2024-03-07"), np.datetime64("2024-04-30"))  # 54 sessions: enough bars
    rows = [f"{day} {(570 + 5 * k) // 60:02d}:{(570 + 5 * k) % 60:02d}:00,{prices[(d * 78 + k) % len(prices)]}"
            for d, day in enumerate(days) for k in range(78)]  # 09:30 .. 15:55
    source = write_csv(tmp_path / "ny.csv", rows)
    out = tmp_path / "ny.parquet"
    done = imported(source, "--out", out, "--timezone", "America/New_York")
    assert "time zone     America/New_York" in done.stdout
    bars = read_bars(out)
    assert bars.timezone == "America/New_York"
    opens = [78 * d for d in (1, 4)]  # the opens of 2024-03-08 (EST) and 2024-03-11 (EDT)
    assert [rows[i][:16] for i in opens] == ["2024-03-08 09:30", "2024-03-11 09:30"]
    np.testing.assert_array_equal((bars.timestamp[opens] % NS_PER_DAY) / 3.6e12, [14.5, 13.5])  # the instants
    clock = bar_features(bars)[opens, 6:8]  # (2, 2): sin and cos of the time of day, on New York's clock
    torch.testing.assert_close(torch.from_numpy(clock[1]), torch.from_numpy(clock[0]))
    ambiguous = write_csv(tmp_path / "fall.csv", [f"2024-11-03 00:30:00,{prices[0]}", f"2024-11-03 01:30:00,{prices[1]}"])
    assert_one_line_error(run_cli("data", "import", ambiguous, "--out", tmp_path / "f.parquet", "--timezone",
                                  "America/New_York"),
                          f"{ambiguous}: column 'Date' at row 1 is 2024-11-03 01:30:00, which happens twice there "
                          "(daylight saving ends) in America/New_York")


def bad(rows: list[str]) -> dict[str, object]:
    """Each bad input: (its CSV rows -> the file's text, extra arguments, the error's start)."""
    header = HEADER
    ragged = rows[:100] + [rows[100].rsplit(",", 1)[0]] + rows[101:]
    word = rows[:50] + [rows[50].replace(rows[50].split(",")[4], "1,234.5", 1).replace(",1,234.5", ',"1,234.5"')] + rows[51:]
    empty = rows[:60] + [rows[60].replace(rows[60].split(",")[2], "", 1)] + rows[61:]
    return {
        "header only": ([header], [], "{src}: no bars below the header"),
        "ragged row": ([header, *ragged], [], "{src}: line 102 has 6 fields where the header has 7"),
        "non-numeric price": ([header, *word], [],
                              "{src}: column 'Close' at row 50 (line 52) is '1,234.5', not a number"),
        "empty price": ([header, *empty], [], "{src}: column 'High' at row 60 (line 62) is empty, every bar needs all"),
        "missing column": ([header.replace("Close,Adj Close", "Clsoe,Adj"), *rows], [],
                           "{src}: no column for close (the file has Date, Open, High, Low, Clsoe, Adj, Volume), bars "
                           "need timestamp, open, high, low, close; map the column that holds it: --column close=Clsoe"),
        "two instruments": ([header + ",Symbol", *(f"{r},ES" for r in rows), *(f"{r},NQ" for r in rows)], [],
                            "{src}: column 'Symbol' names 2 instruments (ES, NQ), bars are of one instrument; pick "
                            "one: --symbol ES"),
        "unknown symbol": ([header + ",Symbol", *(f"{r},ES" for r in rows)], ["--symbol", "CL"],
                           "--symbol CL: {src} holds no bars of CL (its instruments: ES)"),
        "duplicate time": ([header, *rows[:10], rows[9], *rows[10:]], [],
                           "{src}: column 'timestamp' at row 10 equals the previous row's"),
        "unsorted rows": ([header, *rows[:10], rows[11], rows[10], *rows[12:]], [],
                          "{src}: column 'Date' at row 11 is earlier than the row before, bars must be in time order; "
                          "pass --sort"),
        "ambiguous epochs": ([header, *(f"{1_000 + i}," + r.split(",", 1)[1] for i, r in enumerate(rows))], [],
                             "{src}: column 'Date' holds integers 1,000 .. 6,030, which no epoch unit"),
        "epochs past range": ([header, *(f"{1_600_000_000_000 + i},{r.split(',', 1)[1]}" for i, r in enumerate(rows))],
                              ["--epoch-unit", "s"], "{src}: column 'Date' holds 1,600,000,000,000 .. "
                              "1,600,000,005,030, as epoch s past the range of nanosecond timestamps"),
        "unknown zone": ([header, *rows], ["--timezone", "Mars/Olympus_Mons"],
                         "--timezone Mars/Olympus_Mons: not a zone of the time-zone database"),
        "mapping to no column": ([header, *rows], ["--column", "close=Last"],
                                 "--column close=Last: {src} has no column 'Last'"),
        "day-first or month-first": ([header, *(f"{r[5:7]}/{r[8:10]}/{r[:4]}{r[10:]}" for r in rows)], [],
                                     "{src}: times like '01/04/1999' in column 'Date' are not ISO 8601"),
        "offsets without a zone": ([header, *(r.replace(",", "T09:30:00-05:00,", 1) for r in rows)], [],
                                   "{src}: every time in column 'Date' carries the UTC offset -05:00, and time-of-day "
                                   "features need the bars' clock named; name it: --timezone=-05:00"),
    }


@pytest.mark.parametrize("case", list(bad(["1999-01-04,1,2,3,4,5,6"] * 200)))
def test_a_bad_source_is_one_line_exit_2_and_writes_nothing(tmp_path, sp500, case):
    lines, extra, error = bad(yahoo_rows(sp500))[case]
    source = tmp_path / "bars.csv"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out" / "bars.parquet"
    assert_one_line_error(run_cli("data", "import", source, "--out", out, *extra), error.format(src=source))
    assert sorted(p.name for p in tmp_path.rglob("*")) in (["bars.csv"], ["bars.csv", "out"])
    assert not out.exists() and not list(tmp_path.rglob("*.tmp"))


def test_out_is_never_the_source_nor_overwritten_without_force_and_a_failed_import_keeps_it(tmp_path, sp500):
    source = write_csv(tmp_path / "SPX.csv", yahoo_rows(sp500))
    assert_one_line_error(run_cli("data", "import", source, "--out", source),
                          f"--out {source} is the source, an import never writes over what it reads")
    out = tmp_path / "spx.parquet"
    imported(source, "--out", out)
    before = out.read_bytes()
    assert_one_line_error(run_cli("data", "import", source, "--out", out), f"{out} exists, an existing file is never "
                          "overwritten silently; pass --force")
    broken = write_csv(tmp_path / "broken.csv", yahoo_rows(sp500)[:10] + ["1999-13-45,1,1,1,1,1,1"])
    assert_one_line_error(run_cli("data", "import", broken, "--out", out, "--force"), f"{broken}: column 'Date'")
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "SPX.csv", "broken.csv", "spx.parquet"]
    imported(source, "--out", out, "--force")


def test_column_means_the_same_in_every_command_and_in_a_space(tmp_path, sp500):
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(sp500.rename_columns(["ts_event", "open", "high", "low", "close", "volume"]).slice(0, 40), renamed)
    unmapped = f"{renamed}: column 'timestamp' (timestamp) is missing"
    for command in (["data", "check", renamed],
                    ["sweep", "--data", renamed, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps"],
                    ["train", "--data", renamed, "--out", tmp_path / "run"]):
        assert_one_line_error(run_cli(*command), unmapped)
        assert_one_line_error(run_cli(*command, "--column", "timestamp=ts_event"),  # mapped: on to the next rule
                              f"{renamed}: 40 bars are too few")
    mapped_space = write_space(tmp_path, run={"data": {"window": 16, "horizon": 4,
                                                       "columns": {"timestamp": "ts_event"}}})
    assert_one_line_error(run_cli("data", "check", renamed, "--space", mapped_space), f"{renamed}: 40 bars are too few")


def test_an_import_writes_bars_too_few_for_the_default_settings_and_data_check_judges_them(tmp_path, sp500):
    source = write_csv(tmp_path / "short.csv", yahoo_rows(sp500)[:1000])
    out = tmp_path / "short.parquet"
    done = imported(source, "--out", out)  # fewer than default.yaml's window needs: written all the same
    assert len(read_bars(out)) == 1000 and done.stdout.splitlines()[-1] == (
        f"whether they are enough for a sweep: mamba-tune data check {out} --space smoke")
    assert_one_line_error(run_cli("data", "import", source, "--out", tmp_path / "b.parquet", "--space", "smoke"),
                          "--space is an option of `mamba-tune data check`")  # enough for a space: its question


@pytest.mark.parametrize("layout", ["semicolons, a BOM and CRLF", "tabs", "a vendor's Parquet"])
def test_other_layouts_import_to_the_same_bars(tmp_path, sp500, layout):
    rows = [row.replace(",", "\t") for row in yahoo_rows(sp500)]  # Date Open High Low Close Adj Volume
    out, expected = tmp_path / "out.parquet", read_bars_of(sp500, tmp_path)
    if layout == "a vendor's Parquet":
        source, extra = tmp_path / "vendor.parquet", ["--column", "open=px_open", "--column", "high=px_high",
                                                      "--column", "low=px_low", "--column", "close=px_close"]
        pq.write_table(sp500.rename_columns(["ts_event", "px_open", "px_high", "px_low", "px_close", "size"]).append_column(
            "instrument", pa.array(["SPX"] * len(sp500)).dictionary_encode()), source)
        extra += ["--column", "volume=size", "--symbol", "SPX"]
    else:
        separator, ending, bom = (";", "\r\n", "\ufeff") if layout.startswith("semicolons") else ("\t", "\n", "")
        header = "date;open;high;low;close;adj close;volume" if separator == ";" else HEADER.replace(",", "\t")
        source, extra = tmp_path / "bars.csv", []
        source.write_text(bom + ending.join([header, *(r.replace("\t", separator) for r in rows)]) + ending)
    imported(source, "--out", out, *extra)
    bars = read_bars(out)
    for field in ("timestamp", "open", "high", "low", "close", "volume"):
        np.testing.assert_array_equal(getattr(bars, field), getattr(expected, field), err_msg=field)


@pytest.mark.parametrize(("dates", "extra"), [("%Y-%m-%d", []), ("%Y.%m.%d", ["--time-format", "%Y.%m.%d %H:%M"])])
def test_a_date_column_and_a_time_column_are_one_timestamp(tmp_path, sp500, dates, extra):
    """MetaTrader, TradeStation and NinjaTrader export each bar's date and time of day in two columns."""
    prices = [row.split(",", 1)[1].rsplit(",", 2)[0] + "," + row.rsplit(",", 1)[1] for row in yahoo_rows(sp500)]
    days = np.arange(np.datetime64("2024-03-04"), np.datetime64("2024-03-12"))  # eight sessions of 09:30 .. 15:55
    stamps = [day.astype("datetime64[m]") + np.timedelta64(570 + 5 * k, "m") for day in days for k in range(78)]
    rows = [f"{stamp.astype(object).strftime(dates)},{stamp.astype(object).strftime('%H:%M')},{prices[i]}"
            for i, stamp in enumerate(stamps)]
    source = write_csv(tmp_path / "mt.csv", rows, header="Date,Time,Open,High,Low,Close,Volume")
    out = tmp_path / "mt.parquet"
    done = imported(source, "--out", out, *extra)
    assert "timestamp=Date" in done.stdout and "time=Time" in done.stdout
    np.testing.assert_array_equal(read_bars(out).timestamp, np.array(stamps, dtype="datetime64[ns]").view(np.int64))
    broken = write_csv(tmp_path / "broken.csv", rows[:7] + [rows[7].replace(rows[7].split(",")[1], "9h35")] + rows[8:],
                       header="Date,Time,Open,High,Low,Close,Volume")
    error = (f"{broken}: row 7 (line 9) of columns 'Date' and 'Time' is '2024.03.04 9h35', not a time of the form "
             "--time-format '%Y.%m.%d %H:%M' gives" if extra else
             f"{broken}: times like '2024-03-04 9h35' in columns 'Date' and 'Time' are not ISO 8601")
    assert_one_line_error(run_cli("data", "import", broken, "--out", tmp_path / "b.parquet", *extra), error)


def test_a_joined_time_past_the_first_block_in_another_form_is_refused_naming_its_row():
    """Past the block the form was told from, a date-and-time text that does not parse names its row."""
    from model.bars import DataError
    from tuning.bars_import.source import _parsed

    texts = pa.array(["2024-03-04 09:30", "2024-03-04 09:35", "2024-03-04 9h40"])
    with pytest.raises(DataError, match=r"^bars.csv: row 1002 \(line 1004\) of columns 'Date' and 'Time' is "
                                        r"'2024-03-04 9h40', not a time of the form of the first rows"):
        _parsed(Path("bars.csv"), "columns 'Date' and 'Time'", texts, pa.timestamp("ns"), None, first_row=1000)
    parsed = _parsed(Path("bars.csv"), "columns 'Date' and 'Time'", texts[:2], pa.timestamp("ns"), None, 0)
    assert parsed.to_pylist()[1].minute == 35


def test_a_parquet_of_text_prices_or_text_times_is_one_line_exit_2(tmp_path, sp500):
    """A Parquet's columns come typed: text where numbers or times belong is refused, never read as something."""
    texts = tmp_path / "text-prices.parquet"
    pq.write_table(sp500.set_column(4, "close", sp500.column("close").cast(pa.string())), texts)
    assert_one_line_error(run_cli("data", "import", texts, "--out", tmp_path / "a.parquet"),
                          f"{texts}: column 'close' holds string, prices and volume must be numbers")
    times = tmp_path / "text-times.parquet"
    pq.write_table(sp500.set_column(0, "timestamp", pc.strftime(sp500.column("timestamp"), "%Y-%m-%d")),
                   times)
    assert_one_line_error(run_cli("data", "import", times, "--out", tmp_path / "b.parquet"),
                          f"{times}: column 'timestamp' (timestamp) holds string, a Parquet file's times must be")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text-prices.parquet", "text-times.parquet"]
