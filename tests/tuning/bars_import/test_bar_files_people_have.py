"""`mamba-tune data import` of the bar files people have, each written here with known bars: the imported instants
and prices are checked exactly, and each refusal is one line, exit 2, nothing written, naming the flag that works."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from model.bar_times import local_clock_ns
from model.bars import read_bars
from tests.bars import YAHOO_HEADER
from tuning.cli.main import main

NS_PER_S = 10**9


def day_stamps(first: str, n: int) -> np.ndarray:
    """(n,) datetime64[D]: `n` weekdays from `first` on (a market's days: the weekends are gaps)."""
    days = np.arange(np.datetime64(first), np.datetime64(first) + 2 * n)
    return days[np.is_busday(days)][:n]


def prices(n: int) -> dict[str, np.ndarray]:
    """(n,) float64 open, high, low, close in quarter points (exact in binary and in decimal text), and volume."""
    k = np.arange(n, dtype=np.float64)
    open_ = 4500.0 + 0.25 * (k % 400)
    close = open_ + np.where(k % 2 == 0, 1.5, -1.25)
    return {"open": open_, "high": np.maximum(open_, close) + 2.75, "low": np.minimum(open_, close) - 0.5,
            "close": close, "volume": 1000.0 + 7 * k}


def price_fields(bars: dict[str, np.ndarray], i: int, decimal: str = ".", separator: str = ",") -> str:
    """Bar i's open, high, low, close and volume as a CSV's fields."""
    fields = [repr(float(bars[f][i])).replace(".", decimal) for f in ("open", "high", "low", "close")]
    return separator.join([*fields, str(int(bars["volume"][i]))])


def imports(capsys, *args: object) -> str:
    """`mamba-tune data import ARGS`, in this process; -> its output, asserting it succeeded."""
    code = main(["data", "import", *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def refused(capsys, source: Path, *args: object) -> str:
    """`mamba-tune data import SOURCE --out OUT ARGS` refused: exit 2, one line, nothing written; -> the line."""
    out_path = source.parent / "refused" / "bars.parquet"
    code = main(["data", "import", str(source), "--out", str(out_path), *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out_path.parent.exists() and not list(source.parent.glob("*.tmp"))
    return err.removeprefix("error: ").rstrip("\n")


def assert_bars(path: Path, stamps: np.ndarray, bars: dict[str, np.ndarray], zone: str = "UTC") -> None:
    """The imported file holds instants `stamps` (datetime64 in UTC) and exactly `bars`' prices, in `zone`."""
    read = read_bars(path)
    np.testing.assert_array_equal(read.timestamp, stamps.astype("datetime64[ns]").view(np.int64))
    for field, values in bars.items():
        np.testing.assert_array_equal(getattr(read, field), values, err_msg=field)
    assert read.timezone == zone and pq.read_schema(path).field("timestamp").type == pa.timestamp("ns", tz=zone)


@pytest.mark.parametrize("n", [800, 1260])  # three and five years of days: fewer than default.yaml's need, imported
def test_a_yahoo_daily_export_imports_its_close_not_adj_close(tmp_path, capsys, n):
    days, bars = day_stamps("2019-01-02", n), prices(n)
    rows = [f"{d},{price_fields(bars, i).rsplit(',', 1)[0]},{bars['close'][i] * 0.97!r},{int(bars['volume'][i])}"
            for i, d in enumerate(days)]
    source = tmp_path / "SPY.csv"
    source.write_text("\n".join([YAHOO_HEADER, *rows]) + "\n")
    out = imports(capsys, source, "--out", tmp_path / "spy.parquet")
    assert_bars(tmp_path / "spy.parquet", days, bars)
    assert f"rows          {n:,}\n" in out and f"time span     {days[0]} 00:00:00 .. {days[-1]} 00:00:00 (UTC)" in out
    assert re.search(r"^gaps          [\d,]+ longer than 1.5 intervals, the longest 3d$", out, re.M), out
    assert out.splitlines()[-1] == f"whether they are enough for a sweep: mamba-tune data check " \
                                   f"{tmp_path / 'spy.parquet'} --space smoke"


def test_a_vendor_intraday_export_with_date_and_time_columns_and_us_dates(tmp_path, capsys):
    """TradeStation's layout: Date (month-first) and Time columns, five-minute bars; the refusal's form works."""
    stamps = np.array([np.datetime64(f"2024-03-{d:02d}T09:30") + np.timedelta64(5 * k, "m")
                       for d in (11, 12, 13, 14) for k in range(78)])
    bars = prices(len(stamps))
    rows = [f"{s.astype(object):%m/%d/%Y},{s.astype(object):%H:%M},{price_fields(bars, i)}"
            for i, s in enumerate(stamps)]
    source = tmp_path / "es.csv"
    source.write_text("\n".join(["Date,Time,Open,High,Low,Close,Vol", *rows]) + "\n")
    error = refused(capsys, source)
    assert error.startswith(f"{source}: times like '03/11/2024 09:30' in columns 'Date' and 'Time' are not ISO 8601")
    suggested = re.search(r"--time-format '([^']+)'$", error).group(1)
    assert suggested == "%m/%d/%Y %H:%M" and "month-first ('03/13/2024 09:30' has no month 13)" in error
    imports(capsys, source, "--out", tmp_path / "es.parquet", "--time-format", suggested)
    assert_bars(tmp_path / "es.parquet", stamps, bars)


def test_us_dates_import_with_the_form_the_refusal_names_and_unsure_ones_name_both_readings(tmp_path, capsys):
    days, bars = day_stamps("2024-01-02", 40), prices(40)
    rows = [f"{d.astype(object):%m/%d/%Y},{price_fields(bars, i).rsplit(',', 1)[0]},{bars['close'][i]!r},"
            f"{int(bars['volume'][i])}" for i, d in enumerate(days)]  # Yahoo's US layout
    source = tmp_path / "us.csv"
    source.write_text("\n".join([YAHOO_HEADER, *rows]) + "\n")
    error = refused(capsys, source)
    assert error.endswith("they are month-first ('01/15/2024' has no month 15); give that form: --time-format "
                          "'%m/%d/%Y'"), error
    imports(capsys, source, "--out", tmp_path / "us.parquet", "--time-format", "%m/%d/%Y")
    assert_bars(tmp_path / "us.parquet", days, bars)
    early = tmp_path / "early.csv"  # the 2nd to the 11th of January: no field past 12, either order reads them
    early.write_text("\n".join([YAHOO_HEADER, *rows[:8]]) + "\n")
    assert refused(capsys, early).endswith(
        "no day in the first rows is past 12, so day and month could be either: '01/02/2024' is 2 January 2024 with "
        "--time-format '%m/%d/%Y' and 1 February 2024 with --time-format '%d/%m/%Y'; give the one your source uses")
    day_first = tmp_path / "day-first.csv"
    day_first.write_text("\n".join([YAHOO_HEADER, *(f"{d.astype(object):%d/%m/%Y}" + r[10:]
                                                    for d, r in zip(days, rows, strict=True))]) + "\n")
    assert refused(capsys, day_first).endswith("give that form: --time-format '%d/%m/%Y'")
    imports(capsys, day_first, "--out", tmp_path / "day-first.parquet", "--time-format", "%d/%m/%Y")
    assert_bars(tmp_path / "day-first.parquet", days, bars)


def test_european_decimal_commas_and_semicolons_import_with_decimal_comma(tmp_path, capsys):
    days, bars = day_stamps("2024-01-02", 30), prices(30)
    rows = [f"{d.astype(object):%d.%m.%Y};{price_fields(bars, i, ',', ';')}" for i, d in enumerate(days)]
    source = tmp_path / "dax.csv"
    source.write_text("\n".join(["Date;Open;High;Low;Close;Volume", *rows]) + "\n")
    assert refused(capsys, source).endswith("give that form: --time-format '%d.%m.%Y'")
    assert refused(capsys, source, "--time-format", "%d.%m.%Y") == (
        f"{source}: column 'Open' at row 0 (line 2) is '4500,0', a number written with a decimal comma, which is "
        "read only when said; if ',' is the decimal point, read the numbers so: --decimal ,")
    imports(capsys, source, "--out", tmp_path / "dax.parquet", "--time-format", "%d.%m.%Y", "--decimal", ",")
    assert_bars(tmp_path / "dax.parquet", days, bars)
    fields = rows[5].split(";")  # row 5's high with a thousands separator: 4.503,25, never read as 4.50325
    fields[2] = f"{fields[2][0]}.{fields[2][1:]}"
    thousands = tmp_path / "thousands.csv"
    thousands.write_text("\n".join(["Date;Open;High;Low;Close;Volume", *rows[:5], ";".join(fields), *rows[6:]]))
    assert refused(capsys, thousands, "--time-format", "%d.%m.%Y", "--decimal", ",") == (
        f"{thousands}: column 'High' at row 5 (line 7) is {fields[2]!r}, a '.' in a number whose decimal point is "
        "',' (--decimal ,) would be a thousands separator, which is never guessed; if '.' is the decimal point, "
        "leave --decimal out, else export the numbers without a thousands separator")


def test_a_constant_utc_offset_is_the_zone_the_refusal_names(tmp_path, capsys):
    """Tokyo's bars, each time with +09:00: --timezone +09:00 keeps the instants and the Tokyo clock."""
    stamps = np.array([np.datetime64(f"2024-03-{d:02d}T00:00") + np.timedelta64(15 * k, "m")
                       for d in (4, 5, 6) for k in range(20)])  # 09:00 .. 13:45 in Tokyo, as UTC instants
    bars = prices(len(stamps))
    tokyo = [(s + np.timedelta64(9, "h")).astype(object) for s in stamps]
    rows = [f"{t:%Y-%m-%dT%H:%M:%S}+09:00,{price_fields(bars, i)}" for i, t in enumerate(tokyo)]
    source = tmp_path / "n225.csv"
    source.write_text("\n".join(["Datetime,Open,High,Low,Close,Volume", *rows]) + "\n")
    assert refused(capsys, source) == (f"{source}: every time in column 'Datetime' carries the UTC offset +09:00, "
                                       "and time-of-day features need the bars' clock named; name it: --timezone "
                                       "+09:00")
    out = imports(capsys, source, "--out", tmp_path / "n225.parquet", *shlex.split(refused(capsys, source).rsplit(": ", 1)[1]))
    assert "time zone     +09:00" in out
    assert_bars(tmp_path / "n225.parquet", stamps, bars, zone="+09:00")  # read_bars: as data check, sweep, train
    clock = local_clock_ns(read_bars(tmp_path / "n225.parquet").timestamp[:1], "+09:00")
    np.testing.assert_array_equal(clock, [np.datetime64("2024-03-04T09:00", "ns").view(np.int64)])
    winter = tmp_path / "winter.csv"  # New York's winter alone: -05:00 throughout, as a flag argparse reads
    winter.write_text("\n".join(["Datetime,Open,High,Low,Close,Volume", f"2024-01-08T09:30:00-05:00,{price_fields(bars, 0)}",
                                 f"2024-01-09T09:30:00-05:00,{price_fields(bars, 1)}"]) + "\n")
    error = refused(capsys, winter)
    assert error.endswith("name it: --timezone=-05:00")
    imports(capsys, winter, "--out", tmp_path / "winter.parquet", *shlex.split(error.rsplit(": ", 1)[1]))
    assert_bars(tmp_path / "winter.parquet", np.array(["2024-01-08T14:30", "2024-01-09T14:30"], "datetime64[m]"),
                {f: v[:2] for f, v in bars.items()}, zone="-05:00")
    summer = tmp_path / "ny.csv"  # offsets that change: a zone with daylight saving, named by the user
    summer.write_text("\n".join(["Datetime,Open,High,Low,Close,Volume", f"2024-03-08T09:30:00-05:00,{price_fields(bars, 0)}",
                                 f"2024-03-11T09:30:00-04:00,{price_fields(bars, 1)}"]) + "\n")
    assert refused(capsys, summer).endswith("carry UTC offsets (-04:00, -05:00), which change with daylight saving "
                                            "and name no zone, and time-of-day features need the market's clock; "
                                            "name the market's zone, e.g. --timezone America/New_York")


@pytest.mark.parametrize(("unit", "per_second"), [("seconds", 1), ("milliseconds", 1000)])
def test_epoch_seconds_and_milliseconds_are_read_in_the_one_unit_that_fits(tmp_path, capsys, unit, per_second):
    stamps = np.datetime64("2024-03-04T14:30", "s") + np.arange(50) * np.timedelta64(60, "s")
    bars = prices(50)
    counts = stamps.view(np.int64) * per_second
    source = tmp_path / "epochs.csv"
    source.write_text("\n".join(["timestamp,open,high,low,close,volume",
                                 *(f"{c},{price_fields(bars, i)}" for i, c in enumerate(counts))]) + "\n")
    out = imports(capsys, source, "--out", tmp_path / "epochs.parquet")
    assert f"timestamps    integer epoch {unit} (the one unit that puts every bar in 1971-2100)" in out
    assert_bars(tmp_path / "epochs.parquet", stamps, bars)


def test_bad_zone_and_decimal_on_a_parquet_are_one_line(tmp_path, capsys):
    source = tmp_path / "bars.parquet"
    stamps, bars = day_stamps("2024-01-02", 5), prices(5)
    pq.write_table(pa.table({"timestamp": stamps.astype("datetime64[ns]"), **bars}), source)
    assert refused(capsys, source, "--timezone", "+24:00").startswith(
        "--timezone +24:00: not a zone of the time-zone database nor a UTC offset")
    assert refused(capsys, source, "--decimal", ",").startswith(f"--decimal ,: {source} is a Parquet file")
    assert refused(capsys, source, "--decimal", ";") == ("--decimal ;: not a decimal point, the decimal point is '.' "
                                                         "or ','; give one of them, e.g. --decimal ,")


def test_past_the_first_block_a_changed_offset_and_a_thousands_separator_are_found(tmp_path, capsys, monkeypatch):
    """With 2 KiB blocks: one offset in the first block and another later is a zone with daylight saving, never the
    first block's offset; a '.' in a decimal-comma number far down the file names its own row."""
    monkeypatch.setattr("tuning.bars_import.source.BLOCK", 2048)
    stamps = np.datetime64("2024-03-20T09:00") + np.arange(400) * np.timedelta64(1, "D")
    bars = prices(400)
    paris = [f"{(s + np.timedelta64(1 if i < 200 else 2, 'h')).astype(object):%Y-%m-%dT%H:%M}"
             f"{'+01:00' if i < 200 else '+02:00'}" for i, s in enumerate(stamps)]
    source = tmp_path / "cac.csv"
    source.write_text("\n".join(["Datetime,Open,High,Low,Close,Volume",
                                 *(f"{t},{price_fields(bars, i)}" for i, t in enumerate(paris))]) + "\n")
    assert refused(capsys, source).endswith("carry UTC offsets (+01:00, +02:00), which change with daylight saving "
                                            "and name no zone, and time-of-day features need the market's clock; "
                                            "name the market's zone, e.g. --timezone America/New_York")
    imports(capsys, source, "--out", tmp_path / "cac.parquet", "--timezone", "Europe/Paris")
    assert_bars(tmp_path / "cac.parquet", stamps, bars, zone="Europe/Paris")
    rows = [f"{s.astype(object):%Y-%m-%d %H:%M};{price_fields(bars, i, ',', ';')}" for i, s in enumerate(stamps)]
    fields = rows[350].split(";")
    fields[4] = f"{fields[4][0]}.{fields[4][1:]}"  # the close, 4.5xx,yy
    comma = tmp_path / "comma.csv"
    comma.write_text("\n".join(["Date;Open;High;Low;Close;Volume", *rows[:350], ";".join(fields), *rows[351:]]))
    assert refused(capsys, comma, "--decimal", ",").startswith(
        f"{comma}: column 'Close' at row 350 (line 352) is {fields[4]!r}, a '.' in a number")
    comma.write_text("\n".join(["Date;Open;High;Low;Close;Volume", *rows]))
    imports(capsys, comma, "--out", tmp_path / "comma.parquet", "--decimal", ",")
    assert_bars(tmp_path / "comma.parquet", stamps, bars)
