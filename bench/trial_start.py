"""What Ray Train costs a trial besides its training: one-worker trials that train nothing, as a sweep starts them.

Run by hand:
  .venv/bin/python bench/trial_start.py [--trials 6] [--epochs 2] [--repeat 3] [--trainer trial public ray]
On a local Ray started as a sweep on the fast trial path starts it (tuning/sweep/session.start_ray), runs
`--trials` Ray Train runs one after another, each one worker whose loop reports `--epochs` times with a small
checkpoint and imports neither torch nor the model (what a trial's training adds is left out), and prints JSON: the
machine's busy CPU seconds and the wall seconds per trial, for each trainer, each run and as medians, the trainers
taking turns run by run:
- `trial`: the sweep's own on the fast path (tuning/sweep/trial_trainer.py, fast: tuning/sweep/lean_trainer.py: two
  callbacks left out, the controller in a host the trials share, the controller and the workers started without
  a runtime environment of their own);
- `public`: the sweep's own on the public path (trial_trainer's TorchTrainer, as Ray documents it). On the Ray
  started here for the fast path, so the variables a public sweep's Tune and Train hand on to each actor are not
  handed on (its runtime environments are left out of this figure): bench/sweep_overhead.py --paths both measures
  the public path whole;
- `ray`: Ray Train's DataParallelTrainer as it comes.
The trials run from this process, not from a Tune trial's actor. One trial first, not counted, pays Ray's first-use
costs. On a shared machine the figures include its neighbours: compare the trainers of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ray  # noqa: E402
import ray.train  # noqa: E402
from machine_cpu import busy_cpu_s  # noqa: E402
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer  # noqa: E402

from tuning.search.resources import TrialPlan  # noqa: E402
from tuning.sweep import session  # noqa: E402
from tuning.sweep.trial_trainer import trial_trainer  # noqa: E402

TRAINERS = ("trial", "public", "ray")
PLAN = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)


def reporting_loop(config: dict[str, Any]) -> None:
    """A Train worker that trains nothing: `epochs` reports, each with a 10 kB checkpoint."""
    folder = tempfile.mkdtemp()
    for epoch in range(config["epochs"]):
        Path(folder, "last.pt").write_bytes(os.urandom(10_000))
        ray.train.report({"epoch": epoch}, checkpoint=ray.train.Checkpoint.from_directory(folder))


def one_trial(trainer: str, name: str, epochs: int, storage: str) -> None:
    run = ray.train.RunConfig(name=name, storage_path=storage,
                              checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2))
    config = {"epochs": epochs}
    if trainer in ("trial", "public"):
        trial_trainer(reporting_loop, config, PLAN, run, fast=trainer == "trial").fit()
    else:
        DataParallelTrainer(reporting_loop, train_loop_config=config, run_config=run,
                            scaling_config=ray.train.ScalingConfig(num_workers=1)).fit()


def per_trial(trainer: str, trials: int, epochs: int, storage: str) -> dict[str, float]:
    cpu, start = busy_cpu_s(), time.perf_counter()
    for k in range(trials):
        one_trial(trainer, f"{trainer}-{time.monotonic_ns()}-{k}", epochs, storage)
    return {"cpu_s": round((busy_cpu_s() - cpu) / trials, 2),
            "wall_s": round((time.perf_counter() - start) / trials, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trainer", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    args = parser.parse_args()
    session.start_ray(None, trial_path_setting="fast")
    runs: dict[str, list[dict[str, float]]] = {trainer: [] for trainer in args.trainer}
    with tempfile.TemporaryDirectory() as storage:
        one_trial(args.trainer[0], "first-use", args.epochs, storage)
        for _ in range(args.repeat):
            for trainer in args.trainer:
                runs[trainer].append(per_trial(trainer, args.trials, args.epochs, storage))
    ray.shutdown()
    report: dict[str, Any] = {"trials_per_run": args.trials, "epochs": args.epochs, "runs": runs}
    for trainer, measured in runs.items():
        report[f"median_cpu_s_per_trial_{trainer}"] = statistics.median(m["cpu_s"] for m in measured)
        report[f"median_wall_s_per_trial_{trainer}"] = statistics.median(m["wall_s"] for m in measured)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
