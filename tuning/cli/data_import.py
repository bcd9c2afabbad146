"""`mamba-tune data import SRC --out bars.parquet`: users' own bars (CSV or Parquet, any layout) into the canonical
Parquet every other command reads (tuning/bars_import/)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from model.bar_times import EPOCH_UNITS, valid_zone
from tuning.bars_import.canonical import ImportOptions, import_bars, write_canonical
from tuning.bars_import.decimal_comma import DECIMALS
from tuning.cli.data_common import add_column_option, parse_columns, refuse_overwrite, summarise
from tuning.cli.help import subcommand
from tuning.errors import UsageError


def add_command(sub: argparse._SubParsersAction) -> None:
    command = subcommand(
        sub, "import", "import your own bars (CSV or Parquet, any layout) into the Parquet every command reads",
        ("mamba-tune data import SPY.csv --out runs/spy.parquet",
         "mamba-tune data import es.csv --out runs/es.parquet --timezone America/Chicago",
         "mamba-tune data import futures.parquet --out runs/es.parquet --symbol ES --column timestamp=ts_event",
         "mamba-tune data import ticks.csv --out runs/t.parquet --epoch-unit ms --sort",
         "mamba-tune data import dax.csv --out runs/dax.parquet --decimal , --time-format '%d.%m.%Y'",
         "mamba-tune data import nikkei.csv --out runs/n225.parquet --timezone +09:00"),
        "Import bars from CSV (streamed: a file larger than memory is fine) or Parquet: columns found by their "
        "common spellings (Date, Datetime, Time, or a Date and a Time column; Open, High, Low, Close, Adj Close; "
        "Volume; any case) or mapped with --column; one instrument kept (--symbol); times read as instants, never "
        "guessed: integer epochs need a unit "
        "that is given or the only one that fits, times without a zone are in --timezone (default UTC). The bars are "
        "validated as `data check` validates them before anything is written, and the file records where it came "
        "from (source, SHA-256, mapping, zone) in its metadata. Any number of bars is written: whether they are "
        "enough for a search space is `mamba-tune data check OUT --space NAME`.")
    command.add_argument("source", type=Path, help="the CSV or Parquet file of bars")
    command.add_argument("--out", required=True, type=Path, help="the Parquet file to write")
    add_column_option(command, " (fields: timestamp, open, high, low, close, volume, symbol, and time: a column "
                               "of times of day joined to the timestamp column's dates)")
    command.add_argument("--symbol", help="the instrument to keep, where the source holds several (a symbol, ticker "
                                          "or instrument column)")
    command.add_argument("--sort", action="store_true", help="sort the bars by time (else rows out of order are "
                                                              "refused)")
    command.add_argument("--epoch-unit", choices=tuple(EPOCH_UNITS),
                         help="the unit of integer epoch timestamps (default: the only one that puts every bar in "
                              "1971-2100, else refused)")
    command.add_argument("--timezone", metavar="ZONE",
                         help="the market's time zone, e.g. America/New_York, or a fixed UTC offset, e.g. +09:00 "
                              "(--timezone=-05:00 west of UTC): the clock of time-of-day features, and the zone of "
                              "times that carry none (default: the source's zone, else UTC)")
    command.add_argument("--time-format", metavar="FORMAT",
                         help="the strptime form of the CSV's times where they are not ISO 8601, e.g. '%%m/%%d/%%Y'")
    command.add_argument("--decimal", default=".", metavar="POINT",
                         help="the CSV's decimal point, '.' (default) or ',': ',' for European exports (4512,25; "
                              "their fields split by ';'), where a '.' in a number is refused, never read as a "
                              "thousands separator")
    command.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    command.set_defaults(run=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    source, out = args.source, args.out
    if not source.is_file():
        raise UsageError(f"{source}: no such file, the source must be a CSV or Parquet file of bars; check the path"
                         if not source.exists() else f"{source}: is a folder, the source is one file; name the file")
    if out.exists() and out.resolve() == source.resolve():
        raise UsageError(f"--out {out} is the source, an import never writes over what it reads; choose another --out")
    refuse_overwrite(out, args.force)
    if args.timezone is not None and not valid_zone(args.timezone):
        raise UsageError(f"--timezone {args.timezone}: not a zone of the time-zone database nor a UTC offset, a "
                         "zone is named like America/New_York, Europe/London or UTC, an offset like +09:00; fix "
                         "the name")
    if args.decimal not in DECIMALS:  # checked here, not by argparse's choices: its message would hide ','
        raise UsageError(f"--decimal {args.decimal}: not a decimal point, the decimal point is '.' or ','; give one "
                         "of them, e.g. --decimal ,")
    options = ImportOptions(columns=parse_columns(args.column), symbol=args.symbol, sort=args.sort,
                            epoch_unit=args.epoch_unit, timezone=args.timezone, time_format=args.time_format,
                            decimal=args.decimal)
    imported = import_bars(source, options)  # any number of bars: enough for a space is `data check --space`'s
    write_canonical(imported, out)
    for label, value in summarise(imported.bars, epoch_unit_given=args.epoch_unit is not None).items():
        print(f"{label:<13} {value}")
    mapping = ", ".join(f"{field}={name}" for field, name in imported.provenance["columns"].items())
    print(f"wrote {len(imported.bars):,} bars to {out} (from {source}, {imported.provenance['form']}: {mapping})")
    print(f"whether they are enough for a sweep: mamba-tune data check {shlex.quote(str(out))} --space smoke")
    return 0
