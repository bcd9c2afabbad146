"""`mamba-tune data synth | sp500 | check`."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from model.atomic import atomic_path
from model.bars import Bars, read_bars
from model.synth import synth_bars
from tuning.errors import UsageError

_NS = 10**9


def add_commands(commands: argparse._SubParsersAction) -> None:
    data = commands.add_parser("data", help="make or check Parquet files of bars")
    sub = data.add_subparsers(dest="data_command", required=True, parser_class=type(data))
    synth = sub.add_parser("synth", help="synthetic ES-like 5-minute futures bars")
    synth.add_argument("--out", required=True, type=Path, help="Parquet file to write")
    synth.add_argument("--bars", type=int, default=21_600, help="number of bars (default 21600: 180 days)")
    synth.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same file")
    synth.add_argument("--bars-per-day", type=int, default=120,
                       help="bars per session (default 120: 10 hours of 5-minute bars; 276 for ES's 23 hours)")
    synth.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    synth.set_defaults(run=cmd_synth)
    sp500 = sub.add_parser("sp500", help="real S&P 500 daily bars 1999-2018, as shipped by the arch package")
    sp500.add_argument("--out", required=True, type=Path, help="Parquet file to write")
    sp500.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    sp500.set_defaults(run=cmd_sp500)
    check = sub.add_parser("check", help="validate a file of bars and summarise it")
    check.add_argument("path", type=Path)
    check.add_argument("--column", action="append", default=[], metavar="FIELD=NAME",
                       help="map a bar field to the file's column, e.g. --column timestamp=ts_event")
    check.set_defaults(run=cmd_check)


def cmd_synth(args: argparse.Namespace) -> int:
    _refuse_overwrite(args.out, args.force)
    try:
        table = synth_bars(args.bars, seed=args.seed, bars_per_day=args.bars_per_day)
    except ValueError as exc:
        raise UsageError(f"--bars/--bars-per-day: {exc}") from None
    _write_parquet(table, args.out)
    print(f"wrote {table.num_rows:,} synthetic bars (seed {args.seed}) to {args.out}")
    return 0


def cmd_sp500(args: argparse.Namespace) -> int:
    try:
        from arch.data import sp500
    except ImportError:
        raise UsageError("the arch package is not installed, it ships the S&P 500 bars; "
                         "pip install 'mamba-tune[data]'") from None
    _refuse_overwrite(args.out, args.force)
    frame = sp500.load()
    table = pa.table({
        "timestamp": pa.array(frame.index.to_numpy().astype("datetime64[ns]"), type=pa.timestamp("ns", tz="UTC")),
        **{name.lower(): pa.array(frame[name].to_numpy(dtype=np.float64)) for name in ("Open", "High", "Low", "Close")},
        "volume": pa.array(frame["Volume"].to_numpy(dtype=np.int64)),
    })
    _write_parquet(table, args.out)
    print(f"wrote {table.num_rows:,} S&P 500 daily bars to {args.out}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    bars = read_bars(args.path, parse_columns(args.column))
    for label, value in summarise(bars).items():
        print(f"{label:<13} {value}")
    return 0


def parse_columns(pairs: list[str]) -> dict[str, str]:
    """["timestamp=ts_event"] -> {"timestamp": "ts_event"}."""
    mapping = {}
    for pair in pairs:
        field, sep, name = pair.partition("=")
        if not sep or not field or not name:
            raise UsageError(f"--column {pair!r} is not FIELD=NAME, e.g. --column timestamp=ts_event")
        mapping[field.strip()] = name.strip()
    return mapping


def summarise(bars: Bars) -> dict[str, str]:
    """Rows, time span, bar interval, gaps and price range, as printable text."""
    ts = bars.timestamp
    steps = np.diff(ts)
    interval = int(np.median(steps)) if len(steps) else 0
    gaps = steps[steps > 1.5 * interval] if interval else steps[:0]
    return {
        "file": bars.path,
        "rows": f"{len(bars):,}",
        "time span": f"{_when(ts[0])} .. {_when(ts[-1])}",
        "bar interval": _duration(interval) + " (median)",
        "gaps": (f"{len(gaps):,} longer than 1.5 intervals, the longest {_duration(int(gaps.max()))}"
                 if len(gaps) else "none"),
        "price range": f"{bars.low.min():,.2f} .. {bars.high.max():,.2f}",
        "volume": f"{bars.volume.sum():,.0f} in all",
    }


def _refuse_overwrite(path: Path, force: bool) -> None:
    if any(parent.exists() and not parent.is_dir() for parent in path.parents):
        raise UsageError(f"--out {path}: a parent of it is a file, the output needs a folder; choose another --out")
    if path.exists() and not force:
        raise UsageError(f"{path} exists, an existing file is never overwritten silently; "
                         "pass --force or choose another --out")


def _write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _when(ns: int) -> str:
    return str(np.datetime64(int(ns), "ns").astype("datetime64[s]")).replace("T", " ")


def _duration(ns: int) -> str:
    seconds = ns // _NS
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{secs}s" if secs or seconds == 0 else ""]
    return " ".join(p for p in parts if p)
