"""Forecast quality: the sweep's winner against HAR, persistence and the train mean on the test segment.

Run by hand:  .venv/bin/python bench/forecast_quality.py [--spaces smoke sp500] [--data sp500 nasdaq synthetic]
              [--extra-data FILE.parquet ...] [--out runs/bench-forecast-quality]

For each bars file (S&P 500 and NASDAQ Composite daily bars from `mamba-tune data sp500 | nasdaq`: does
what a space finds on one index hold on another; synthetic 5-minute bars from `mamba-tune data synth`;
any --extra-data file) and each search space (smoke.yaml, and sp500.yaml:
default.yaml's shape sized for a 2-core CPU), a real sweep runs (`mamba-tune sweep`: local Ray,
Optuna, ASHA and the gate, the finalists confirmed over seeds) and its one look at the test segment
is read back (test.json). Prints JSON, one entry per (data, space):
  test_loss            the winner alone (its best.pt)
  ensemble_test_loss   its seed ensemble, the mean forecast of its runs on every confirm seed (null: none)
  har, persistence, mean   the baselines on the same test samples
  ratio_to_har         test_loss / har (<= 0.95: the goal); ensemble_ratio_to_har the same for the ensemble
  dm_pvalue_har        the Diebold-Mariano p-value of the winner's squared errors against HAR's (the sweep's verdict)
  sweep_s              the sweep's wall-clock seconds
All losses are mean squared errors in scaled target units (log volatility standardised on the
training segment). A sweep is a measurement of one run: rerun to see its spread.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from tuning.sweep_files import read_test_looks

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "tuning.cli"]
SPACES = {"smoke": ROOT / "search_spaces" / "smoke.yaml", "sp500": ROOT / "search_spaces" / "sp500.yaml"}


def bars_file(kind: str, folder: Path) -> Path:
    """The bars of `kind` (sp500 | nasdaq | synthetic), written by `mamba-tune data` once."""
    path = folder / f"{kind}.parquet"
    if not path.exists():
        args = ["synth", "--out", path, "--bars", "3000"] if kind == "synthetic" else [kind, "--out", path]
        subprocess.run([*CLI, "data", *map(str, args)], cwd=ROOT, check=True, capture_output=True)
    return path


def sweep(bars: Path, space: Path, storage: Path) -> dict:
    """Run the sweep; -> its test.json, and its seconds."""
    started = time.monotonic()
    done = subprocess.run([*CLI, "sweep", "--data", str(bars), "--space", str(space), "--storage", str(storage)],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"error: sweep of {space.name} on {bars.name} failed ({done.stderr.strip()[-500:]})")
    (folder,) = [p.parent for p in storage.glob("*/test.json")]
    return {**read_test_looks(folder)[-1], "sweep_s": seconds}  # its one look


def entry(data: str, space: str, look: dict) -> dict:
    ensemble = look.get("ensemble")
    har = look["baseline_har"]
    return {"data": data, "space": space, "test_loss": look["test_loss"],
            "ensemble_test_loss": ensemble["test_loss"] if ensemble else None,
            "har": har, "persistence": look["baseline_persistence"], "mean": look["baseline_mean"],
            "ratio_to_har": look["test_loss"] / har,
            "ensemble_ratio_to_har": ensemble["test_loss"] / har if ensemble else None,
            "dm_pvalue_har": look["vs_har"]["dm_pvalue"],
            "n_test": look["n_test"], "sweep_s": round(look["sweep_s"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", nargs="+", default=list(SPACES), choices=list(SPACES))
    parser.add_argument("--data", nargs="+", default=["sp500", "synthetic"],
                        choices=["sp500", "nasdaq", "synthetic"])
    parser.add_argument("--extra-data", nargs="*", type=Path, default=[], help="more bars files to sweep on")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-forecast-quality")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    files = {kind: bars_file(kind, args.out) for kind in args.data} | {p.stem: p.resolve() for p in args.extra_data}
    results = []
    for data, path in files.items():
        for space in args.spaces:
            storage = args.out / f"sweeps-{data}-{space}-{int(time.time())}"
            results.append(entry(data, space, sweep(path, SPACES[space], storage)))
            print(json.dumps(results[-1]), file=sys.stderr)  # progress: each sweep as it ends
    print(json.dumps({"results": results}, indent=1))


if __name__ == "__main__":
    main()
