"""Orchestration overhead of a sweep on each trial path: Ray Tune + Ray Train + Optuna + MLflow around training.

The trial paths: tuning/sweep/trial_path.py.

Run by hand:
  .venv/bin/python bench/sweep_overhead.py [--space search_spaces/smoke.yaml] [--data BARS] [--repeat 3]
                                           [--peer optuna] [--paths auto | both | fast,public | public ...]
  e.g. the two paths beside Optuna by hand:
  .venv/bin/python bench/sweep_overhead.py --peer optuna --paths both --repeat 3
Runs the space's sweep (search, confirmation, the look at the test segment) on a fresh local Ray, `--repeat`
times on each path of `--paths`, on `--data` (default: the S&P 500 daily bars the arch package ships, as
`mamba-tune data sp500` writes them). `--paths`: `auto` (the default) runs the space as it is (its
resources.trial_path, auto: the fast path where Ray's hooks fit); `fast`, `public` or both (`both` = `fast,public`)
set resources.trial_path to each in turn. Each sweep runs in a process of its own, as `mamba-tune sweep` does (the
fast path changes process-wide state of Ray Tune's that would leak into the next sweep's path). The paths and
the peer take turns, repeat by repeat (fast, public, peer, fast, public, peer, ...), so a noisy neighbour
touches them alike. Prints JSON: for each path, each run and as medians,
- orchestration_cpu_s_per_trial: the CPU time the whole machine spent while the sweep ran (psutil, user +
  system: Ray's processes are not the driver's children), less the trials' time inside fit's loop (each trial
  on one thread), per trial: what Ray, Tune, Train and tracking cost a trial. Target (fast path): at most 8.
- sweep_wall_s: from loading the bars to the sweep's end, Ray's start included.
- trial_path: the path each sweep ran, as its `trial path:` line says it.
With `--peer optuna`, each repeat also runs the same search by hand (bench/optuna_peer.py: Optuna's TPE and
successive halving, the gate, the confirmation runs, the same fit() on the same bars, one process, no Ray, no
tracking, no look at the test segment), and each path's `peer_ratio` is its median sweep wall time over the
peer's median wall time. Target (fast path): at most 2.5.
With both paths, `public_over_fast` is the public path's median over the fast path's, of the wall time and of
the orchestration CPU per trial: what a Ray whose hooks do not fit costs a sweep.
On a shared machine the CPU figures include its neighbours: compare runs made side by side, in one session.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from machine_cpu import busy_cpu_s  # noqa: E402

from model.data import load_dataset  # noqa: E402
from tuning.search.space import TRIAL_PATHS, load_space, parse_space  # noqa: E402
from tuning.sweep_files import sweep_paths  # noqa: E402
from tuning.tracking.store import open_store, resolve_store  # noqa: E402
from tuning.yaml_io import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STOPS = ("completed", "asha", "gate", "nan", "error")
AUTO, FAST, PUBLIC = TRIAL_PATHS


def sp500_bars(path: Path) -> Path:
    """The arch package's S&P 500 daily bars written as `mamba-tune data sp500` writes them."""
    from tuning.cli.data import arch_daily_bars

    pq.write_table(arch_daily_bars("sp500"), path)
    return path


def trial_paths(given: str) -> list[str]:
    """`--paths`: auto, both, or trial paths separated by commas (fast, public); -> the paths, in turn order."""
    paths = [FAST, PUBLIC] if given == "both" else [p.strip() for p in given.split(",") if p.strip()]
    if not paths or any(p not in TRIAL_PATHS for p in paths) or len(set(paths)) < len(paths):
        raise argparse.ArgumentTypeError(f"auto, both, or some of {', '.join(TRIAL_PATHS)} separated by commas, "
                                         f"each once; got {given!r}")
    return paths


def space_on_path(space_path: Path, path: str) -> tuple[dict[str, Any], Any]:
    """The space's values and SweepSpace with resources.trial_path set to `path` (auto: the space's own)."""
    values = read_yaml(space_path, "space")
    if path != AUTO:
        values["resources"] = {**(values.get("resources") or {}), "trial_path": path}
    return values, parse_space(values, str(space_path))


def ray_sweep(space_path: Path, bars: Path, trials: int | None, folder: Path, path: str) -> dict[str, Any]:
    """One sweep of the space on trial path `path`, on a fresh local Ray, tracked to a SQLite MLflow store in
    `folder`. Run in a process of its own (one_sweep)."""
    from tuning.sweep import session
    from tuning.sweep.trial_path import trial_path

    values, space = space_on_path(space_path, path)
    chosen = trial_path(space.resources.trial_path)
    trials = trials or space.trials
    driver = psutil.Process()
    cpu_before, driver_before, start = busy_cpu_s(), driver.cpu_times(), time.perf_counter()
    data = load_dataset(bars, space.run.data)
    paths = sweep_paths(str(folder / "sweeps"), space.name)
    store = resolve_store(f"sqlite:///{folder}/mlflow/mlflow.db")
    client = open_store(store)
    session.start_ray(None, trial_path_setting=space.resources.trial_path)
    try:
        plan = session.cluster_plan(space)
        manifest = session.write_manifest(paths, bars, values, trials, data, store.uri)
        tracking = session.open_tracking(store, client, paths, manifest, space, data, plan)
        outcome = session.run(paths, space, data, trials, plan, tracking)
        wall_s, cpu_s, driver_after = time.perf_counter() - start, busy_cpu_s() - cpu_before, driver.cpu_times()
    finally:
        session.ray.shutdown()
    in_loop = sum(r.train_s for r in outcome.records)
    return {
        "trial_path": chosen.describe(),
        "trials": len(outcome.records), "concurrency": plan.concurrency,
        "epochs_run": sum(r.stop_epoch for r in outcome.records),
        "stop_reasons": {k: sum(r.stop_reason == k for r in outcome.records) for k in STOPS},
        "sweep_wall_s": round(wall_s, 1), "in_loop_train_s_sum": round(in_loop, 1),
        "machine_cpu_s": round(cpu_s, 1),
        "driver_cpu_s": round(driver_after.user + driver_after.system - driver_before.user - driver_before.system, 1),
        "orchestration_cpu_s_per_trial": round((cpu_s - in_loop) / len(outcome.records), 1),
        "overhead_wall_ratio": round(outcome.wall_s / (in_loop / plan.concurrency), 2),
    }


def one_sweep(space_path: Path, bars: Path, trials: int | None, folder: Path, path: str) -> dict[str, Any]:
    """ray_sweep in a process of its own (this script, `--one-sweep`), as `mamba-tune sweep` runs one."""
    folder.mkdir(parents=True)
    result = folder / "result.json"
    command = [sys.executable, __file__, "--one-sweep", str(result), "--space", str(space_path), "--data", str(bars),
               "--paths", path, *(["--trials", str(trials)] if trials else [])]
    subprocess.run(command, check=True, stdout=sys.stderr)  # what Ray prints stays out of the JSON
    return json.loads(result.read_text())


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


def summary(runs: list[dict[str, Any]], peer_wall_s: float | None) -> dict[str, Any]:
    """A path's runs and their medians; its peer_ratio where the peer ran."""
    medians = {"median_orchestration_cpu_s_per_trial": statistics.median(r["orchestration_cpu_s_per_trial"]
                                                                         for r in runs),
               "median_sweep_wall_s": statistics.median(r["sweep_wall_s"] for r in runs)}
    ratio = {"peer_ratio": round(medians["median_sweep_wall_s"] / peer_wall_s, 2)} if peer_wall_s else {}
    seen = sorted({r["trial_path"] for r in runs})  # one, unless a run's Ray differed
    return {"trial_path": seen[0] if len(seen) == 1 else seen, **medians, **ratio, "runs": runs}


def report(space: Path, data: Path | None, paths: list[str], runs: dict[str, list[dict[str, Any]]],
           peer: str | None, peers: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON printed: each path's summary, the peer's, and the public path over the fast one."""
    peer_wall_s = statistics.median(p["wall_s"] for p in peers) if peers else None
    out: dict[str, Any] = {"space": str(space), "data": str(data or "S&P 500 daily bars (arch)"),
                           "repeat": len(runs[paths[0]]), "order": [*paths, *([peer] if peer else [])],
                           "paths": {path: summary(runs[path], peer_wall_s) for path in paths}}
    if peers:
        out |= {"peer": peer, "median_peer_wall_s": peer_wall_s, "peer_runs": peers}
    if {FAST, PUBLIC} <= set(paths):
        fast, public = out["paths"][FAST], out["paths"][PUBLIC]
        out["public_over_fast"] = {
            key: round(public[f"median_{key}"] / fast[f"median_{key}"], 2)
            for key in ("sweep_wall_s", "orchestration_cpu_s_per_trial")}
    return out | {"target_orchestration_cpu_s_per_trial": 8.0, **({"target_peer_ratio": 2.5} if peers else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces/smoke.yaml")
    parser.add_argument("--data", type=Path, help="bars (Parquet); default: the S&P 500 daily bars arch ships")
    parser.add_argument("--trials", type=int, help="search trials (default: the space's)")
    parser.add_argument("--repeat", type=int, default=3, help="runs on each path; medians are reported")
    parser.add_argument("--peer", choices=["optuna"], help="also time the same search by hand, run by run")
    parser.add_argument("--paths", type=trial_paths, default=[AUTO],
                        help="auto (the space's own trial path), both (fast,public), or fast, public or fast,public")
    parser.add_argument("--one-sweep", type=Path, help=argparse.SUPPRESS)  # one ray_sweep, its JSON to this file
    args = parser.parse_args()
    if args.one_sweep:
        result = ray_sweep(args.space, args.data, args.trials, args.one_sweep.parent, args.paths[0])
        args.one_sweep.write_text(json.dumps(result))
        return
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in args.paths}
    peers = []
    with tempfile.TemporaryDirectory() as scratch:
        bars = args.data or sp500_bars(Path(scratch) / "sp500.parquet")
        for k in range(args.repeat):
            for path in args.paths:
                runs[path].append(one_sweep(args.space, bars, args.trials, Path(scratch) / f"{path}{k}", path))
            if args.peer:
                peers.append(optuna_peer(args.space, bars, args.trials))
    print(json.dumps(report(args.space, args.data, args.paths, runs, args.peer, peers), indent=2))


if __name__ == "__main__":
    main()
