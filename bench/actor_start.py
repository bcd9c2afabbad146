"""What starting one Ray actor costs the machine, with and without a runtime environment of its own.

Run by hand:
  .venv/bin/python bench/actor_start.py [--actors 8] [--repeat 3]
On a fresh local Ray (no dashboard, as a sweep starts one), starts `--actors` bare actors one after another (each
created, called once, killed), first plainly, then each with `runtime_env={"env_vars": {...}}` as Ray Train gives its
controllers and workers, `--repeat` times side by side, and prints JSON: the machine's busy CPU seconds per actor
(psutil, every process: an actor's process is the raylet's child, not this one's), each run and the medians, and
their difference. On the fast trial path a sweep's trial starts its Train controller and workers without one
(tuning/sweep/lean_trainer.py).
On a shared machine the figures include its neighbours: compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import ray
from machine_cpu import busy_cpu_s

SETTLE_S = 1.0  # after the last kill, for the processes' exits to be counted


@ray.remote(num_cpus=0)
class Bare:
    def ping(self) -> int:
        return 1


def cpu_per_actor(actors: int, **options) -> float:
    """Machine CPU seconds per actor started, called once and killed with `options`."""
    before = busy_cpu_s()
    for _ in range(actors):
        actor = Bare.options(**options).remote()
        ray.get(actor.ping.remote())
        ray.kill(actor)
    time.sleep(SETTLE_S)
    return (busy_cpu_s() - before) / actors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ray.init(include_dashboard=False, log_to_driver=False)
    cpu_per_actor(2)  # Ray's first-use costs
    plain, with_env = [], []
    for _ in range(args.repeat):
        plain.append(round(cpu_per_actor(args.actors), 3))
        with_env.append(round(cpu_per_actor(args.actors, runtime_env={"env_vars": {"MAMBA_TUNE_BENCH": "1"}}), 3))
    ray.shutdown()
    report = {"actors_per_run": args.actors, "plain_cpu_s_per_actor": plain, "env_vars_cpu_s_per_actor": with_env,
              "median_plain": statistics.median(plain), "median_env_vars": statistics.median(with_env)}
    report["runtime_env_cost_cpu_s_per_actor"] = round(report["median_env_vars"] - report["median_plain"], 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
