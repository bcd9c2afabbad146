"""`mamba-tune data import` on a CSV of 10 million bars: time and peak memory, beside reading the Parquet it writes.

Run by hand:  .venv/bin/python bench/bars_import.py [--bars 10000000] [--repeat 1] [--workdir DIR]
The CSV is Yahoo's layout (Date,Open,High,Low,Close,Adj Close,Volume; times as 2000-01-03 00:00:00, one minute
apart; synthetic ES-like prices from model/synth.py), written a million rows at a time, once, into a temporary folder
or --workdir (kept there and reused while its bar count matches). Each side runs in its own fresh process: the import
as the CLI does it (import_bars, then write_canonical into a canonical Parquet), and, beside it, model.bars.read_bars
of that Parquet. Each reports its own peak RSS: VmHWM of /proc/self/status, reset to the current RSS (clear_refs)
once numpy, pyarrow and the project's modules are imported. Peak memory is reported as the rise over that base,
against the raw column bytes (8 bytes x 6 columns x bars); --repeat K runs each side K times, reporting the median.
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_pipeline import MEMORY  # noqa: E402  (peak memory of a fresh process alone: VmHWM, reset after imports)

HEADER = "Date,Open,High,Low,Close,Adj Close,Volume"
CHUNK = 1_000_000  # rows generated and written at a time
START = "2000-01-03T00:00:00"  # a Monday; one bar a minute from here

IMPORT = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import numpy, pyarrow, pyarrow.csv, pyarrow.parquet
from tuning.bars_import.canonical import ImportOptions, import_bars, write_canonical
{memory}
start = time.perf_counter()
imported = import_bars(Path({csv!r}), ImportOptions(columns={{}}))
write_canonical(imported, Path({out!r}))
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "base_kib": base, "peak_kib": vm("VmHWM"), "rows": len(imported.bars)}}))
"""

PARQUET_READ = """
import json, sys, time
sys.path.insert(0, {root!r})
import numpy, pyarrow, pyarrow.parquet
from model.bars import read_bars
{memory}
start = time.perf_counter()
bars = read_bars({out!r})
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "base_kib": base, "peak_kib": vm("VmHWM"), "rows": len(bars)}}))
"""


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the benchmark's subprocess failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_csv(path: Path, n_bars: int) -> None:
    """n_bars Yahoo-style bars at `path`, CHUNK rows at a time: each chunk's prices continue from the last close."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    from model.synth import synth_bars

    schema = pa.schema([(name, pa.string() if name == "Date" else pa.float64()) for name in HEADER.split(",")])
    options = pcsv.WriteOptions(include_header=False, quoting_style="none")  # the header is written unquoted below
    tmp = path.with_suffix(".partial")
    price = 5000.0
    with open(tmp, "wb") as stream:
        stream.write(f"{HEADER}\n".encode())
        with pcsv.CSVWriter(stream, schema, write_options=options) as writer:
            for first in range(0, n_bars, CHUNK):
                rows = min(CHUNK, n_bars - first)
                bars = synth_bars(rows, seed=first // CHUNK, price=price)
                minutes = np.datetime64(START, "s") + np.arange(first, first + rows, dtype=np.int64) * 60
                dates = pc.strftime(pa.array(minutes, type=pa.timestamp("s")), format="%Y-%m-%d %H:%M:%S")
                close = bars.column("close")
                writer.write_table(pa.table([dates, bars.column("open"), bars.column("high"), bars.column("low"),
                                             close, close, bars.column("volume").cast(pa.float64())], schema=schema))
                price = close[-1].as_py()
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side; the median is reported")
    parser.add_argument("--workdir", type=Path, help="where the CSV and the Parquet go (default: a temporary folder)")
    args = parser.parse_args()
    if args.bars < 1 or args.repeat < 1:
        parser.error("--bars and --repeat must be at least 1")
    sys.path.insert(0, str(ROOT))

    with tempfile.TemporaryDirectory() as temporary:
        folder = args.workdir or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        csv, out = folder / f"bars_{args.bars}.csv", folder / f"bars_{args.bars}.parquet"
        generated = None
        if not csv.exists():
            start = time.perf_counter()
            write_csv(csv, args.bars)
            generated = round(time.perf_counter() - start, 1)
        imports, reads = [], []
        for _ in range(args.repeat):
            out.unlink(missing_ok=True)
            imports.append(run(IMPORT.format(root=str(ROOT), csv=str(csv), out=str(out), memory=MEMORY)))
            reads.append(run(PARQUET_READ.format(root=str(ROOT), out=str(out), memory=MEMORY)))
        csv_bytes, parquet_bytes = csv.stat().st_size, out.stat().st_size
    for side in imports + reads:
        if side["rows"] != args.bars:
            sys.exit(f"a side read {side['rows']:,} bars of {args.bars:,}")
    column_bytes = args.bars * 6 * 8

    def describe(runs: list[dict]) -> dict:
        rises = [(side["peak_kib"] - side["base_kib"]) * 1024 for side in runs]
        rise = statistics.median(rises)
        return {"seconds": round(statistics.median(side["seconds"] for side in runs), 2),
                "peak_rise_mib": round(rise / 2**20, 1), "peak_over_column_bytes": round(rise / column_bytes, 2),
                "base_rss_mib": round(statistics.median(side["base_kib"] for side in runs) / 1024, 1)}

    result = {"bars": args.bars, "csv_bytes": csv_bytes, "parquet_bytes": parquet_bytes, "column_bytes": column_bytes,
              "csv_generation_seconds": generated, "repeat": args.repeat,
              "statistic": "median" if args.repeat > 1 else "single run",
              "import": describe(imports), "parquet_read": describe(reads),
              "goal": "import peak under 3x the column bytes"}
    result["import"]["meets_goal"] = result["import"]["peak_over_column_bytes"] < 3
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
