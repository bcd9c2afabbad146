"""Orchestration overhead of a sweep: Ray Tune + Ray Train + Optuna around the training loop.

Run by hand:  .venv/bin/python bench/sweep_overhead.py [--space search_spaces/smoke.yaml] [--bars 3000]
Runs the space's sweep on synthetic bars on a local Ray and prints JSON: the sweep's wall
time against (the sum of its trials' time inside fit's loop) / concurrency (1.0 would be
no overhead), and the overhead per trial in seconds; and the CPU time the whole machine
spent while the sweep ran (psutil, user + system: Ray's processes are not the driver's
children), less the trials' time inside fit's loop (each trial on one thread), per trial.
On a shared machine the CPU figure includes its neighbours: compare runs side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from model.data import load_dataset  # noqa: E402
from model.synth import synth_bars  # noqa: E402
from tuning.search.space import load_space  # noqa: E402
from tuning.sweep import session  # noqa: E402
from tuning.sweep_files import sweep_paths  # noqa: E402
from tuning.tracking.store import open_store, resolve_store  # noqa: E402
from tuning.yaml_io import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def busy_cpu_s() -> float:
    """CPU seconds every core of this machine has spent busy (user, nice, system) since boot."""
    times = psutil.cpu_times()
    return times.user + times.nice + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces/smoke.yaml")
    parser.add_argument("--bars", type=int, default=3000)
    parser.add_argument("--trials", type=int)
    args = parser.parse_args()
    space = load_space(args.space)
    trials = args.trials or space.trials
    with tempfile.TemporaryDirectory() as folder:
        bars = Path(folder) / "bars.parquet"
        pq.write_table(synth_bars(args.bars, seed=0), bars)
        data = load_dataset(bars, space.run.data)
        paths = sweep_paths(str(Path(folder) / "sweeps"), space.name)
        store = resolve_store(f"sqlite:///{folder}/mlflow/mlflow.db")
        client = open_store(store)
        session.start_ray(None)
        plan = session.cluster_plan(space)
        manifest = session.write_manifest(paths, bars, read_yaml(args.space, "space"), trials, data, store.uri)
        tracking = session.open_tracking(store, client, paths, manifest, space, data, plan)
        cpu_before = busy_cpu_s()
        outcome = session.run(paths, space, data, trials, plan, tracking)
        cpu_s = busy_cpu_s() - cpu_before
        session.ray.shutdown()
    in_loop = sum(r.train_s for r in outcome.records)
    ideal = in_loop / plan.concurrency
    print(json.dumps({
        "space": str(args.space), "trials": len(outcome.records), "concurrency": plan.concurrency,
        "epochs_run": sum(r.stop_epoch for r in outcome.records),
        "stop_reasons": {k: sum(r.stop_reason == k for r in outcome.records)
                         for k in ("completed", "asha", "gate", "nan", "error")},
        "sweep_wall_s": round(outcome.wall_s, 1), "in_loop_train_s_sum": round(in_loop, 1),
        "overhead_ratio": round(outcome.wall_s / ideal, 2),
        "overhead_s_per_trial": round((outcome.wall_s * plan.concurrency - in_loop) / len(outcome.records), 1),
        "target_ratio": 1.15,
        "machine_cpu_s": round(cpu_s, 1),
        "overhead_cpu_s_per_trial": round((cpu_s - in_loop) / len(outcome.records), 1),
    }, indent=2))


if __name__ == "__main__":
    main()
