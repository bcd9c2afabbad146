"""Head-node memory of a trial: what its driver and the Ray Train actors beside it use while it trains.

Run by hand:  .venv/bin/python bench/driver_memory.py [--trials 2] [--out runs/bench-driver-memory]

Runs a real `mamba-tune sweep` of the smoke space with every trial at once and samples, every
second, the memory of each Ray process by its role (its process title): the trial's driver (Tune's
function trainable, `ImplicitFunc`, reused from trial to trial), the host of its Ray Train controller
(`ControllerHost`, reused with it: tuning/sweep/controller_host.py) and the
small actor Ray Train starts per trial (`SynchronizationActor`; tuning/sweep/lean_trainer.py leaves out the
placement-group cleaner and the dataset manager), and the training workers (`RayTrainWorker`, on a GPU
node in a cluster). Prints JSON:
  roles            per role: processes seen, the median over processes of each one's peak USS and RSS (MB)
                   and of its CPU seconds
  per_trial_head_mb   the sum of the non-worker roles' median peak USS: what one trial adds to the head
  per_trial_head_cpu_s  the same roles' CPU seconds (user + system) over a trial's life, beside sweep_s
  sweep_driver_mb  the peak USS of the `mamba-tune sweep` process itself
USS (memory no other process shares) is what a trial adds; RSS counts torch's shared pages in every process.
tuning/search/resources.py's TRIAL_DRIVER_MEMORY_MB is set from per_trial_head_mb, with a margin.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "tuning.cli"]
HEAD_ROLES = ("ImplicitFunc", "ControllerHost", "SynchronizationActor")
ROLES = (*HEAD_ROLES, "RayTrainWorker")
MB = 2**20


def role_of(process: psutil.Process) -> str | None:
    """"ControllerHost" for a process titled `ray::ControllerHost.run`; "sweep" for the sweep's own process."""
    title = " ".join(process.cmdline())
    if "tuning.cli sweep" in title:
        return "sweep"
    return next((role for role in ROLES if title.startswith(f"ray::{role}")), None)


def sample(peaks: dict[int, tuple[str, float, float, float]]) -> None:
    """Raise each Ray process's (role, peak USS MB, peak RSS MB, CPU seconds) in `peaks` (by pid) to what it is now."""
    for process in psutil.process_iter():
        try:
            role = role_of(process)
            if role is None:
                continue
            info, cpu = process.memory_full_info(), process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        _, uss, rss, _ = peaks.get(process.pid, (role, 0.0, 0.0, 0.0))
        peaks[process.pid] = (role, max(uss, info.uss / MB), max(rss, info.rss / MB), cpu.user + cpu.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2, help="trials, all at once (default 2: this machine's cores)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-driver-memory")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bars = args.out / "bars.parquet"
    subprocess.run([*CLI, "data", "synth", "--out", str(bars), "--bars", "3000"], cwd=ROOT, check=True,
                   capture_output=True)
    name = f"memory-{len(list((args.out / 'sweeps').glob('*')))}"
    start = time.monotonic()
    sweep = subprocess.Popen([*CLI, "sweep", "--data", str(bars), "--space", str(ROOT / "search_spaces/smoke.yaml"),
                              "--trials", str(args.trials), "--name", name, "--storage", str(args.out / "sweeps"),
                              "--tracking-uri", f"sqlite:///{args.out / 'mlflow.db'}"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks: dict[int, tuple[str, float, float, float]] = {}
    done = threading.Event()
    threading.Thread(target=lambda: (sweep.wait(), done.set()), daemon=True).start()
    while not done.wait(1.0):
        sample(peaks)
    roles = {}
    for role in (*ROLES, "sweep"):
        seen = [(uss, rss, cpu) for r, uss, rss, cpu in peaks.values() if r == role]
        if seen:
            roles[role] = {"processes": len(seen), "peak_uss_mb": round(statistics.median(u for u, _, _ in seen)),
                           "peak_rss_mb": round(statistics.median(r for _, r, _ in seen)),
                           "cpu_s": round(statistics.median(c for _, _, c in seen), 1)}
    head = [roles[r] for r in HEAD_ROLES if r in roles]
    print(json.dumps({"trials": args.trials, "sweep_rc": sweep.returncode, "sweep_s": round(time.monotonic() - start),
                      "roles": roles, "per_trial_head_mb": sum(r["peak_uss_mb"] for r in head),
                      "per_trial_head_cpu_s": round(sum(r["cpu_s"] for r in head), 1),
                      "sweep_driver_mb": roles.get("sweep", {}).get("peak_uss_mb")}, indent=1))


if __name__ == "__main__":
    main()
