"""Orchestration overhead of a sweep: Ray Tune + Ray Train + Optuna + MLflow around the training loop.

Run by hand:
  .venv/bin/python bench/sweep_overhead.py [--space search_spaces/smoke.yaml] [--data BARS] [--repeat 3]
                                           [--peer optuna]
Runs the space's sweep (search, confirmation, the look at the test segment) on a fresh local Ray, `--repeat`
times, on `--data` (default: the S&P 500 daily bars the arch package ships, as `mamba-tune data sp500` writes
them) and prints JSON: for each run and as medians,
- orchestration_cpu_s_per_trial: the CPU time the whole machine spent while the sweep ran (psutil, user +
  system: Ray's processes are not the driver's children), less the trials' time inside fit's loop (each trial
  on one thread), per trial: what Ray, Tune, Train and tracking cost a trial. Target: at most 8.
- sweep_wall_s: from loading the bars to the sweep's end, Ray's start included.
With `--peer optuna`, each run is followed by the same search by hand (bench/optuna_peer.py: Optuna's TPE and
successive halving, the gate, the confirmation runs, the same fit() on the same bars, one process, no Ray, no
tracking, no look at the test segment), and `peer_ratio` is the sweep's median wall time over the peer's.
Target: at most 2.5.
On a shared machine the CPU figures include its neighbours: compare runs made side by side, in one session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from machine_cpu import busy_cpu_s  # noqa: E402

from model.data import load_dataset  # noqa: E402
from tuning.search.space import load_space  # noqa: E402
from tuning.sweep import session  # noqa: E402
from tuning.sweep_files import sweep_paths  # noqa: E402
from tuning.tracking.store import open_store, resolve_store  # noqa: E402
from tuning.yaml_io import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STOPS = ("completed", "asha", "gate", "nan", "error")


def sp500_bars(path: Path) -> Path:
    """The arch package's S&P 500 daily bars written as `mamba-tune data sp500` writes them."""
    from tuning.cli.data import arch_daily_bars

    pq.write_table(arch_daily_bars("sp500"), path)
    return path


def ray_sweep(space_path: Path, bars: Path, trials: int | None, folder: Path) -> dict[str, Any]:
    """One sweep of the space on a fresh local Ray, tracked to a SQLite MLflow store in `folder`."""
    space = load_space(space_path)
    trials = trials or space.trials
    driver = psutil.Process()
    cpu_before, driver_before, start = busy_cpu_s(), driver.cpu_times(), time.perf_counter()
    data = load_dataset(bars, space.run.data)
    paths = sweep_paths(str(folder / "sweeps"), space.name)
    store = resolve_store(f"sqlite:///{folder}/mlflow/mlflow.db")
    client = open_store(store)
    session.start_ray(None)
    try:
        plan = session.cluster_plan(space)
        manifest = session.write_manifest(paths, bars, read_yaml(space_path, "space"), trials, data, store.uri)
        tracking = session.open_tracking(store, client, paths, manifest, space, data, plan)
        outcome = session.run(paths, space, data, trials, plan, tracking)
        wall_s, cpu_s, driver_after = time.perf_counter() - start, busy_cpu_s() - cpu_before, driver.cpu_times()
    finally:
        session.ray.shutdown()
    in_loop = sum(r.train_s for r in outcome.records)
    return {
        "trials": len(outcome.records), "concurrency": plan.concurrency,
        "epochs_run": sum(r.stop_epoch for r in outcome.records),
        "stop_reasons": {k: sum(r.stop_reason == k for r in outcome.records) for k in STOPS},
        "sweep_wall_s": round(wall_s, 1), "in_loop_train_s_sum": round(in_loop, 1),
        "machine_cpu_s": round(cpu_s, 1),
        "driver_cpu_s": round(driver_after.user + driver_after.system - driver_before.user - driver_before.system, 1),
        "orchestration_cpu_s_per_trial": round((cpu_s - in_loop) / len(outcome.records), 1),
        "overhead_wall_ratio": round(outcome.wall_s / (in_loop / plan.concurrency), 2),
    }


def optuna_peer(space_path: Path, bars: Path, trials: int | None) -> dict[str, Any]:
    """The same search by hand (bench/optuna_peer.py), timed from loading the bars."""
    from optuna_peer import confirm_by_hand, search_by_hand

    space = load_space(space_path)
    start = time.perf_counter()
    data = load_dataset(bars, space.run.data)
    search = search_by_hand(space, data, trials or space.trials)
    confirm = confirm_by_hand(space, str(bars), data, search)
    wall_s = time.perf_counter() - start
    return {"trials": len(search) + len(confirm), "epochs_run": sum(t.epochs for t in search + confirm),
            "stop_reasons": {k: sum(t.stop == k for t in search) for k in STOPS},
            "wall_s": round(wall_s, 1), "in_fit_s_sum": round(sum(t.train_s for t in search + confirm), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces/smoke.yaml")
    parser.add_argument("--data", type=Path, help="bars (Parquet); default: the S&P 500 daily bars arch ships")
    parser.add_argument("--trials", type=int, help="search trials (default: the space's)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; medians are reported")
    parser.add_argument("--peer", choices=["optuna"], help="also time the same search by hand, run by run")
    args = parser.parse_args()
    runs, peers = [], []
    with tempfile.TemporaryDirectory() as scratch:
        bars = args.data or sp500_bars(Path(scratch) / "sp500.parquet")
        for k in range(args.repeat):
            folder = Path(scratch) / f"run{k}"
            runs.append(ray_sweep(args.space, bars, args.trials, folder))
            if args.peer:
                peers.append(optuna_peer(args.space, bars, args.trials))
    report: dict[str, Any] = {
        "space": str(args.space), "data": str(args.data or "S&P 500 daily bars (arch)"), "runs": runs,
        "median_orchestration_cpu_s_per_trial": statistics.median(r["orchestration_cpu_s_per_trial"] for r in runs),
        "median_sweep_wall_s": statistics.median(r["sweep_wall_s"] for r in runs),
        "target_orchestration_cpu_s_per_trial": 8.0,
    }
    if peers:
        report |= {"peer": args.peer, "peer_runs": peers,
                   "median_peer_wall_s": statistics.median(p["wall_s"] for p in peers),
                   "peer_ratio": round(report["median_sweep_wall_s"] / statistics.median(p["wall_s"] for p in peers),
                                       2),
                   "target_peer_ratio": 2.5}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
