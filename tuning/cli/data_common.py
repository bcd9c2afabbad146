"""What the `data` commands share: --data, --column pairs, the refusal to overwrite, a printable summary of bars."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from model.bar_times import EPOCH_YEARS, local_clock_ns
from model.bars import Bars
from model.bars_location import CREDENTIALS, bars_location, is_remote, require_object
from model.data import DataConfig
from model.features import VOLUME_FEATURES
from tuning.errors import UsageError
from tuning.search.shipped_spaces import space_path
from tuning.uri_secrets import refuse_credentials

_NS = 10**9
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def add_data_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--data: a Parquet file of bars, or an s3:// or gs:// URI of one (credentials from the environment)."""
    parser.add_argument("--data", required=True, type=data_argument, metavar="PATH|URI",
                        help=f"{what}: a path, or s3://BUCKET/KEY or gs://BUCKET/KEY (credentials from {CREDENTIALS})")


def data_argument(text: str) -> str | Path:
    """--data as given: a Path, or a URI that holds no credential (the manifest and MLflow keep it) and whose
    scheme is one pyarrow reads bars from (model/bars_location.py). Raises UsageError, which argparse lets through."""
    if "://" in text:
        refuse_credentials("--data", text, CREDENTIALS)
    try:
        return bars_location(text)
    except ValueError as exc:
        raise UsageError(f"--data {exc}") from None


def require_bars_file(source: str | Path) -> None:
    """Refuse, before anything starts, --data that names no file (or no object these credentials may read)."""
    if is_remote(source):
        require_object(source)
    elif not Path(source).is_file():
        raise UsageError(f"--data {source}: no such file; make one with `mamba-tune data synth --out {source}`")


def add_column_option(parser: argparse.ArgumentParser, where: str = "") -> None:
    """--column FIELD=NAME, repeatable: the same mapping in every command (and data.columns in a space)."""
    parser.add_argument("--column", action="append", default=[], metavar="FIELD=NAME",
                        help=f"map a bar field to the file's column, e.g. --column timestamp=ts_event{where}")


def parse_columns(pairs: list[str]) -> dict[str, str]:
    """["timestamp=ts_event"] -> {"timestamp": "ts_event"}."""
    mapping = {}
    for pair in pairs:
        field, sep, name = pair.partition("=")
        if not sep or not field or not name:
            raise UsageError(f"--column {pair!r} is not FIELD=NAME, e.g. --column timestamp=ts_event")
        mapping[field.strip()] = name.strip()
    return mapping


def add_settings_options(parser: argparse.ArgumentParser) -> None:
    """--config or --space: the data settings the bars must be enough for."""
    settings = parser.add_mutually_exclusive_group()
    settings.add_argument("--config", type=Path, help="check the bars are enough for this run configuration's data "
                          "settings (default: the default settings)")
    settings.add_argument("--space", type=space_path, help="check the bars are enough for this search space's data "
                          "settings and its walk-forward folds (a shipped space by name, e.g. smoke, or a YAML file)")


def data_settings(config: Path | None, space: Path | None) -> tuple[DataConfig, str]:
    """The data settings the bars must be enough for (a run configuration's, a space's with its folds, else the
    defaults), and where they come from."""
    from tuning.search.recipe import TrainingRecipe

    if config is not None:
        return TrainingRecipe.from_yaml(config).data, str(config)
    if space is not None:
        from tuning.search.space import load_space

        loaded = load_space(space)
        folds = loaded.confirm.folds if loaded.confirm is not None else 1
        return replace(loaded.run.data, fold=folds), str(space)
    return DataConfig(), "the default data settings"


def summarise(bars: Bars, epoch_unit_given: bool = False) -> dict[str, str]:
    """Rows, time span (on the bars' clock), zone, bar interval, gaps and price range, as printable text."""
    ts = bars.timestamp
    steps = np.diff(ts)
    interval = int(np.median(steps)) if len(steps) else 0
    gaps = steps[steps > 1.5 * interval] if interval else steps[:0]
    first, last = local_clock_ns(ts[[0, -1]], bars.timezone)
    return {
        "file": bars.path,
        "rows": f"{len(bars):,}",
        "time span": f"{_when(first)} .. {_when(last)} ({bars.timezone})",
        "time zone": f"{bars.timezone} (time-of-day features read this clock)",
        **({"timestamps": f"integer epoch {UNIT_NAMES[bars.epoch_unit]} " + (
            "(--epoch-unit)" if epoch_unit_given else
            f"(the one unit that puts every bar in {EPOCH_YEARS[0]}-{EPOCH_YEARS[1]})")} if bars.epoch_unit else {}),
        "bar interval": _duration(interval) + " (median)",
        "gaps": (f"{len(gaps):,} longer than 1.5 intervals, the longest {_duration(int(gaps.max()))}"
                 if len(gaps) else "none"),
        "price range": f"{bars.low.min():,.2f} .. {bars.high.max():,.2f}",
        "volume": f"{bars.volume.sum():,.0f} in all" if bars.has_volume else
                  "none in the file (volume_change left out of the features)",
    }


def refuse_overwrite(path: Path, force: bool) -> None:
    if any(parent.exists() and not parent.is_dir() for parent in path.parents):
        raise UsageError(f"--out {path}: a parent of it is a file, the output needs a folder; choose another --out")
    if path.exists() and not force:
        raise UsageError(f"{path} exists, an existing file is never overwritten silently; "
                         "pass --force or choose another --out")


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


def inputs_line(n_features: int, features: list[str]) -> str:
    """What `train` and `sweep` print about the model's inputs: the features per bar (`features`, a Dataset's
    summary["features"]) and, for bars without volume, the features left out (VOLUME_FEATURES), e.g.
    "inputs: 11 features per bar (the bars have no volume: volume_change left out)"."""
    missing = [name for name in VOLUME_FEATURES if name not in features]
    return f"inputs: {n_features} features per bar" + (
        f" (the bars have no volume: {', '.join(missing)} left out)" if missing else "")
