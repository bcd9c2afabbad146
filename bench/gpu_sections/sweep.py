"""Section 6, a two-trial sweep through the real CLI: `python -m tuning.cli sweep`, Ray, Optuna and MLflow.

The space is search_spaces/default.yaml's (its search, initial point, data, model and train settings) cut
to two trials of three epochs, a gate at epoch 1 with no limit (the check is the path, not the forecast)
and no confirmation runs; `gpus_per_trial: auto`, so the memory probe measures and packs the trials on
the GPU. Skipped, with the reason, where Ray, Optuna or MLflow is not installed. With --cpu-smoke the
tiny workload on CPU, the probe against a 4 GB --memory-budget.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from typing import Any

import yaml

from bench.gpu_sections.context import ROOT, SectionContext, Skipped, bars_file, require_cuda, workload
from tuning.yaml_io import read_yaml

NEEDS = ("ray", "optuna", "mlflow")
EXIT_MEANING = {0: "a winner (the sweep's normal end)", 1: "a failure: every trial failed, or the test look did",
                2: "bad input", 3: "no trial passed the gate", 130: "interrupted"}
MARGIN_S = 20  # of the section's time, kept to report what the sweep printed if it has to be stopped


def run(context: SectionContext) -> dict[str, Any]:
    if not context.smoke:
        require_cuda()
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise Skipped(f"skipped: not installed: {', '.join(missing)} (install the project with its default "
                      "dependencies: pip install -e .)")
    work = workload(context)
    bars = bars_file(context, work.bars)
    folder = context.workdir / "sweep"
    folder.mkdir(exist_ok=True)
    space = folder / "gpu-check.yaml"
    space.write_text(yaml.safe_dump(sweep_space(work, context.smoke)))
    command = [sys.executable, "-m", "tuning.cli", "sweep", "--data", str(bars), "--space", str(space),
               "--storage", str(folder / "sweeps"), "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
               *(["--memory-budget", "4096"] if context.smoke else [])]
    limit = max(10.0, context.timeout_s - MARGIN_S)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=limit)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:  # its output so far still says how far it got
        code = f"stopped after {limit:.0f} s"
        stdout, stderr = ((out or b"").decode(errors="replace") if isinstance(out, bytes) else (out or "")
                          for out in (exc.stdout, exc.stderr))
    ledger = folder / "sweeps" / "gpu-check" / "trials.json"
    records = json.loads(ledger.read_text()) if ledger.exists() else []
    lines = stdout.splitlines()
    return {"command": " ".join(command[1:]), "exit_code": code, "exit_meaning": EXIT_MEANING.get(code, "see output"),
            "wall_s": round(time.perf_counter() - start, 1),
            "lines": [line for line in lines if any(k in line for k in ("memory probe", "backend", "at once", "GPU"))],
            "trials": [{k: r.get(k) for k in ("params", "stop_reason", "stop_epoch", "best_val_loss", "train_s")}
                       for r in records],
            "output_tail": "" if code == 0 else "\n".join(lines[-30:]) + "\n" + stderr[-3000:]}


def sweep_space(work, smoke: bool) -> dict[str, Any]:
    """default.yaml's space, cut to two short trials (see the module's docstring)."""
    values = read_yaml(work.space, "space")
    values.pop("confirm", None)
    values |= {"name": "gpu-check", "trials": 2,
               "scheduler": {"max_epochs": 3, "grace_period": 1, "reduction_factor": 2}, "gate": {"epoch": 1}}
    if smoke:
        values["search"]["batch_size"] = {"choices": [32, 64]}
        values["initial"] = [{**values["initial"][0], "batch_size": 64}]
        values["resources"] = {"workers": 1, "cpus_per_worker": 1, "gpus_per_trial": 0}
        values["data"] = {**values["data"], "window": work.data.window}
        values["model"] = {k: getattr(work.model, k) for k in ("d_model", "n_layers", "d_state", "headdim",
                                                               "chunk_size")}
        values["train"] = {**values.get("train", {}), "device": "cpu"}
    return values
