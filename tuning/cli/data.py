"""`mamba-tune data synth | sp500 | nasdaq | check`."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from model.atomic import atomic_path
from model.bars import read_bars
from model.bars_enough import TooFewBars, require_enough_bars
from model.synth import next_monday, synth_bars
from tuning.bars_import.canonical import provenance_of
from tuning.cli.data_common import (
    add_column_option,
    add_settings_options,
    data_settings,
    parse_columns,
    refuse_overwrite,
    summarise,
)
from tuning.cli.data_import import add_command as add_import_command
from tuning.cli.help import subcommand
from tuning.cli.spaces_for_bars import spaces_for, with_spaces_that_fit
from tuning.errors import UsageError

# The real daily bars the arch package ships (1999-2018): command -> the index they are bars of.
ARCH_DAILY_BARS = {"sp500": "S&P 500", "nasdaq": "NASDAQ Composite"}


def add_commands(commands: argparse._SubParsersAction) -> None:
    data = subcommand(commands, "data", "make, import or check Parquet files of bars",
                       ("mamba-tune data synth --out runs/bars.parquet",
                        "mamba-tune data sp500 --out runs/sp500.parquet",
                        "mamba-tune data import SPY.csv --out runs/spy.parquet",
                        "mamba-tune data check runs/bars.parquet"),
                       "Make Parquet files of OHLCV bars (synthetic, or the real S&P 500 and NASDAQ Composite daily "
                       "bars the arch package ships), import your own (CSV or Parquet of any layout) or check a file: "
                       "each is read and validated as a sweep reads it.")
    sub = data.add_subparsers(dest="data_command", required=True, parser_class=type(data))
    synth = subcommand(sub, "synth", "write synthetic ES-like 5-minute futures bars",
                        ("mamba-tune data synth --out runs/bars.parquet",
                         "mamba-tune data synth --out runs/es.parquet --bars 63480 --bars-per-day 276 --seed 3",
                         "mamba-tune data synth --out runs/new.parquet --bars 800 --seed 1 --after runs/bars.parquet"),
                        "Write synthetic ES-like 5-minute futures bars: intraday volatility and volume patterns, "
                        "volatility clustering and jumps; the same seed gives the same file.")
    synth.add_argument("--out", required=True, type=Path, help="Parquet file to write")
    synth.add_argument("--bars", type=int, default=21_600, help="number of bars (default 21600: 180 days)")
    synth.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same file")
    synth.add_argument("--bars-per-day", type=int, default=120,
                       help="bars per session (default 120: 10 hours of 5-minute bars; 276 for ES's 23 hours)")
    synth.add_argument("--after", type=Path, metavar="BARS",
                       help="start on the Monday after the last bar of this file (new bars for `mamba-tune promote`)")
    synth.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    synth.set_defaults(run=cmd_synth)
    for name, index in ARCH_DAILY_BARS.items():
        real = subcommand(sub, name, f"write the real {index} daily bars 1999-2018 the arch package ships",
                          (f"mamba-tune data {name} --out runs/{name}.parquet",))
        real.add_argument("--out", required=True, type=Path, help="Parquet file to write")
        real.add_argument("--force", action="store_true", help="overwrite --out if it exists")
        real.set_defaults(run=cmd_arch_daily_bars)
    add_import_command(sub)
    check = subcommand(sub, "check", "validate a file of bars and summarise it",
                        ("mamba-tune data check runs/bars.parquet",
                         "mamba-tune data check ticks.parquet --column timestamp=ts_event --column volume=size",
                         "mamba-tune data check runs/bars.parquet --space search_spaces/smoke.yaml"),
                        "Validate a Parquet file of bars as a sweep reads it (columns, types, order, prices, "
                        "enough bars to train on) and summarise it; exit 2 with one line naming the first problem.")
    check.add_argument("path", type=Path, help="the Parquet file of bars")
    add_settings_options(check)
    add_column_option(check, " (over the --space's or --config's data.columns)")
    check.set_defaults(run=cmd_check)


def cmd_synth(args: argparse.Namespace) -> int:
    refuse_overwrite(args.out, args.force)
    start = next_monday(int(read_bars(args.after).timestamp[-1])) if args.after else None
    try:
        table = synth_bars(args.bars, seed=args.seed, bars_per_day=args.bars_per_day,
                           **({"start_ns": start} if start is not None else {}))
    except ValueError as exc:
        raise UsageError(f"--bars/--bars-per-day: {exc}") from None
    _write_parquet(table, args.out)
    after = f", after the bars of {args.after}" if args.after else ""
    print(f"wrote {table.num_rows:,} synthetic bars (seed {args.seed}{after}) to {args.out}")
    return 0


def cmd_arch_daily_bars(args: argparse.Namespace) -> int:
    """`data sp500 | nasdaq`: the index's daily bars from the arch package, as UTC-midnight timestamps."""
    index = ARCH_DAILY_BARS[args.data_command]
    try:
        importlib.import_module(f"arch.data.{args.data_command}")  # arch.data.sp500, arch.data.nasdaq
    except ImportError:
        raise UsageError(f"the arch package is not installed, it ships the {index} bars; "
                         "pip install 'mamba-tune[data]'") from None
    refuse_overwrite(args.out, args.force)
    table = arch_daily_bars(args.data_command)
    _write_parquet(table, args.out)
    print(f"wrote {table.num_rows:,} {index} daily bars to {args.out}")
    return 0


def arch_daily_bars(name: str) -> pa.Table:
    """The daily bars the arch package ships as `arch.data.<name>` ("sp500", "nasdaq"), as UTC-midnight bars."""
    frame = importlib.import_module(f"arch.data.{name}").load()
    return pa.table({
        "timestamp": pa.array(frame.index.to_numpy().astype("datetime64[ns]"), type=pa.timestamp("ns", tz="UTC")),
        **{column.lower(): pa.array(frame[column].to_numpy(dtype=np.float64))
           for column in ("Open", "High", "Low", "Close")},
        "volume": pa.array(frame["Volume"].to_numpy(dtype=np.int64)),
    })


def cmd_check(args: argparse.Namespace) -> int:
    settings, source = data_settings(args.config, args.space)
    bars = read_bars(args.path, {**settings.columns, **parse_columns(args.column)})  # --column over the settings'
    try:
        require_enough_bars(args.path, len(bars), settings)  # one training sample and the minimum validation/test ones
    except TooFewBars as exc:  # the line names the changes that fit; the spaces that do, too
        raise with_spaces_that_fit(exc) from None
    for label, value in summarise(bars).items():
        print(f"{label:<13} {value}")
    if (provenance := provenance_of(args.path)) is not None:
        print(f"{'imported from':<13} {provenance['source']} ({provenance['form']}, SHA-256 "
              f"{provenance['source_sha256'][:16]}) at {provenance['imported_at']}")
    longest = f" (the search's longest {settings.sample_window})" if settings.sample_window > settings.window else ""
    print(f"{'settings':<13} enough for {source}: data.window {settings.window}{longest}, "
          f"data.horizon {settings.horizon}, data.val_fraction {settings.val_fraction}, "
          f"data.test_fraction {settings.test_fraction}"
          + (f", confirm.folds {settings.fold}" if settings.fold > 1 else ""))
    print(f"{'spaces':<13} enough for {spaces_for(len(bars))}")
    return 0


def _write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
