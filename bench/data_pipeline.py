"""The data pipeline on a 10-million-bar file: time and peak memory, against a pandas loop.

Run by hand:  .venv/bin/python bench/data_pipeline.py [--bars 10000000]
Each side runs in its own fresh process and reports its own peak RSS (VmHWM). mamba-tune's side:
load + validate + features + split/scale + windows (load_dataset, then one batch of
windows). The baseline: pandas read_parquet, then a plain Python loop over the rows that
validates each bar and computes the same features. Peak memory is reported as the rise
over the interpreter with its imports, against the raw column bytes (8 bytes x 6 columns
x bars). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Peak memory of this process image alone: VmHWM, reset to the current RSS once the imports are done
# (ru_maxrss would carry over the parent's peak through fork and exec).
MEMORY = """
def vm(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field + ":"))
open("/proc/self/clear_refs", "w").write("5")
base = vm("VmRSS")
"""

OURS = """
import json, sys, time
sys.path.insert(0, {root!r})
import numpy, pyarrow, torch
from model.data import load_dataset
{memory}
start = time.perf_counter()
data = load_dataset({path!r})
inputs, targets = data.batch(data.train_index[:512])
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "base_kib": base, "peak_kib": vm("VmHWM"), "samples": len(data.train_index)}}))
"""

BASELINE = """
import json, math, sys, time
import pandas as pd
{memory}
start = time.perf_counter()
frame = pd.read_parquet({path!r})
rows, prev_close, prev_volume, prev_ts = [], None, None, None
for ts, o, h, l, c, v in frame[["timestamp", "open", "high", "low", "close", "volume"]].itertuples(index=False):
    if not (l <= o <= h and l <= c <= h and l > 0 and v >= 0) or (prev_ts is not None and ts <= prev_ts):
        raise ValueError("bad bar")
    ret = 0.0 if prev_close is None else math.log(c / prev_close)
    dvol = 0.0 if prev_volume is None else math.log1p(v) - math.log1p(prev_volume)
    rows.append((ret, math.log(h / l), math.log(c / o), math.log(h / max(o, c)), math.log(min(o, c) / l), dvol))
    prev_close, prev_volume, prev_ts = c, v, ts
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "base_kib": base, "peak_kib": vm("VmHWM"), "samples": len(rows)}}))
"""


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=10_000_000)
    parser.add_argument("--skip-baseline", action="store_true", help="only mamba-tune's side")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq

    from model.synth import synth_bars

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "bars.parquet")
        pq.write_table(synth_bars(args.bars, seed=0, bars_per_day=276), path)  # 10M bars fit before 2262
        raw_bytes = args.bars * 6 * 8
        ours = run(OURS.format(root=str(ROOT), path=path, memory=MEMORY))
        baseline = None if args.skip_baseline else run(BASELINE.format(path=path, memory=MEMORY))

    def describe(side: dict) -> dict:
        rise = (side["peak_kib"] - side["base_kib"]) * 1024
        return {"seconds": round(side["seconds"], 2), "peak_rise_mb": round(rise / 2**20),
                "peak_rise_over_raw_bytes": round(rise / raw_bytes, 2), "peak_rss_mb": round(side["peak_kib"] / 1024)}

    result = {"bars": args.bars, "raw_column_mb": round(raw_bytes / 2**20), "mamba_tune": describe(ours)}
    if baseline is not None:
        result["pandas_loop"] = describe(baseline)
        result["speedup"] = round(baseline["seconds"] / ours["seconds"], 1)
        result["pandas_loop_note"] = "validates and computes features only; materialising its windows would need " \
                                     f"{args.bars * 128 * 8 * 4 / 2**30:.0f} GiB"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
