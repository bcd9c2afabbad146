"""One prepared GPU check: kernels, epoch time, memory, a packed sweep. Under 8 minutes on one GPU.

Run by hand on a CUDA machine with the `cuda` extra installed (`make test` there installs it):
    .venv/bin/python bench/gpu_check.py [--skip-sweep]
    .venv/bin/python bench/gpu_check.py --dry-run-cpu   # every step but parity, tiny, on CPU: the script works
Prints JSON:
  parity:   mamba_ssm's fused kernels against the pure-torch path (outputs and gradients), fp32
            and bf16 autocast: the largest differences and whether they are within tolerance;
  epoch:    the original system's workload (21,600 bars, 80/20, batch 512, the default model) in
            fp32 and bf16: seconds per epoch (the second epoch, after kernel compilation) and
            samples/s. Anchor: the original system reports 1.86 minutes per epoch on an RTX 4090;
            the aim is under 2 seconds on an H200;
  memory:   the CUDA context a process holds, and the measured peak of training at each batch
            size (fp32, bf16), with how many such trials fit on this GPU (the packing rule, docs/gpus.md);
  sweep:    `mamba-tune sweep` of 4 trials packed on this GPU by the memory probe (gpus_per_trial auto).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from model.backend import load_fused_kernel  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.data import DataConfig, load_dataset  # noqa: E402
from model.mamba2 import Mamba2  # noqa: E402
from model.precision import autocast  # noqa: E402
from model.step_memory import CUDA_CONTEXT_BYTES, MB, step_peak_bytes  # noqa: E402
from model.synth import synth_bars  # noqa: E402
from model.train import TrainConfig, fit  # noqa: E402
from tuning.sweep.memory_probe import trials_per_gpu  # noqa: E402

BARS = 21_600  # the original system: 180 days of ES bars
TOLERANCE = {"fp32": {"rtol": 1e-3, "atol": 1e-3}, "bf16": {"rtol": 3e-2, "atol": 3e-2}}


def parity(precision: str) -> dict:
    """Fused vs torch Mamba2 layer: max abs difference of outputs and parameter gradients."""
    torch.manual_seed(0)
    cuda = torch.device("cuda")
    fused = Mamba2(d_model=256, d_state=64, headdim=64, ngroups=1, chunk_size=256, backend="mamba_ssm").to(cuda)
    reference = Mamba2(d_model=256, d_state=64, headdim=64, ngroups=1, chunk_size=256, backend="torch").to(cuda)
    reference.load_state_dict(fused.state_dict())
    u = torch.randn(8, 128, 256, device=cuda)  # (batch, window, d_model)
    with autocast(precision, cuda):
        out_fused, out_ref = fused(u), reference(u)
    grad = torch.randn_like(out_ref)
    out_fused.backward(grad.to(out_fused.dtype))
    out_ref.backward(grad.to(out_ref.dtype))
    out_diff = (out_fused.float() - out_ref.float()).abs().max().item()
    grad_diff = max((a.grad - b.grad).abs().max().item() / (b.grad.abs().max().item() or 1.0)
                    for a, b in zip(fused.parameters(), reference.parameters(), strict=True))
    within = True
    try:
        torch.testing.assert_close(out_fused.float(), out_ref.float(), **TOLERANCE[precision])
    except AssertionError:
        within = False
    return {"backend": fused.active_backend(), "max_abs_output_diff": out_diff,
            "max_relative_grad_diff": grad_diff, "outputs_within_tolerance": within}


def epoch_seconds(data, model: ModelConfig, device: str, precision: str) -> dict:
    """Two epochs of the original workload; the second one's time (the first compiles Triton kernels)."""
    config = TrainConfig(epochs=2, batch_size=512, lr=5e-5, device=device, precision=precision)
    result = fit(config, model, data)
    second = result.history[-1]
    return {"epoch_s": round(second["epoch_s"], 3), "samples_per_s": round(second["samples_per_s"]),
            "first_epoch_s": round(result.history[1]["epoch_s"], 3), "val_loss": second["val_loss"],
            "peak_memory_mb": round(second["peak_memory_mb"])}


def context_bytes() -> int:
    """What this process holds on the GPU outside torch's allocator (context, kernels, workspaces)."""
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def memory(data, model: ModelConfig, device: str, batch_sizes: list[int]) -> dict:
    """Each batch size's measured peak; on a GPU, how many such trials fit on it (the packing rule)."""
    on_gpu = device == "cuda"
    total = torch.cuda.get_device_properties(0).total_memory if on_gpu else None
    rows = {}
    for precision in ("fp32", "bf16"):
        config = TrainConfig(batch_size=64, device=device, precision=precision)
        step_peak_bytes(model, config, data)  # warm-up: lazy initialisation and kernel compilation
        for batch in batch_sizes:
            peak = step_peak_bytes(model, dataclasses.replace(config, batch_size=batch), data)
            rows[f"{precision}/{batch}"] = {"peak_mb": round(peak / MB),
                                            "trials_per_gpu": trials_per_gpu(total, peak) if on_gpu else None}
    gpu = {"gpu": torch.cuda.get_device_name(0), "total_mb": round(total / MB),
           "context_mb_measured": round(context_bytes() / MB)} if on_gpu else {}
    return {**gpu, "context_mb_assumed": round(CUDA_CONTEXT_BYTES / MB), "batch_sizes": rows}


def packed_sweep(bars: Path, folder: Path, model: ModelConfig, device: str) -> dict:
    """`mamba-tune sweep`: 4 trials of the default model packed on this GPU (gpus_per_trial auto: the probe)."""
    space = {"name": "gpu-smoke", "trials": 4, "seed": 0,
             "search": {"learning_rate": {"low": 1e-4, "high": 3e-3, "log": True},
                        "weight_decay": {"low": 1e-4, "high": 1e-1, "log": True},
                        "batch_size": {"choices": [256, 512, 1024]}},
             "scheduler": {"max_epochs": 6, "grace_period": 2, "reduction_factor": 2},
             "gate": {"epoch": 2, "ratio_to_e0": 0.95},
             "resources": {"workers": 1, "cpus_per_worker": 2 if device == "cuda" else 0.5,
                           "gpus_per_trial": "auto" if device == "cuda" else 0},  # the probe packs them
             "run": {"model": model.to_dict(), "train": {"device": device, "precision": "bf16"}}}
    path = folder / "gpu-smoke.yaml"
    path.write_text(yaml.safe_dump(space))
    start = time.perf_counter()
    budget = [] if device == "cuda" else ["--memory-budget", "4096"]  # on GPU: each trial's share of it
    command = [sys.executable, "-m", "tuning.cli", "sweep", "--data", str(bars), "--space", str(path),
               "--storage", str(folder / "sweeps"), "--tracking-uri", f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}",
               *budget]
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=360)
    except subprocess.TimeoutExpired as exc:  # the rest of the report stands; its output so far is bytes
        stdout, stderr = ((out or b"").decode(errors="replace") for out in (exc.stdout, exc.stderr))
        done = subprocess.CompletedProcess(command, "timed out after 360 s", stdout, stderr)
    ledger = folder / "sweeps" / "gpu-smoke" / "trials.json"
    records = json.loads(ledger.read_text()) if ledger.exists() else []
    return {"returncode": done.returncode, "wall_s": round(time.perf_counter() - start, 1),
            "plan": next((line for line in done.stdout.splitlines() if " trial(s) at once" in line), None),
            "memory_probe": next((line for line in done.stdout.splitlines() if line.startswith("memory probe")), None),
            "trials": [{k: r[k] for k in ("params", "stop_reason", "stop_epoch", "best_val_loss", "train_s")}
                       for r in records],
            "stderr_tail": done.stderr[-1500:] if done.returncode else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-sweep", action="store_true", help="leave out the packed sweep")
    parser.add_argument("--dry-run-cpu", action="store_true",
                        help="every step but kernel parity on CPU, with a tiny model and 3,000 bars: checks the script")
    args = parser.parse_args()
    if not (args.dry_run_cpu or torch.cuda.is_available()):
        print("error: no CUDA GPU here, gpu_check needs one; run it on a GPU machine, or pass --dry-run-cpu",
              file=sys.stderr)
        sys.exit(2)
    device, bars_count = ("cpu", 3000) if args.dry_run_cpu else ("cuda", BARS)
    model = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16) if args.dry_run_cpu \
        else ModelConfig()
    kernel, why = load_fused_kernel()
    report: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
                    "fused_kernels": kernel is not None, "fused_kernels_missing": why or None}
    with tempfile.TemporaryDirectory() as folder:
        bars = Path(folder) / "bars.parquet"
        pq.write_table(synth_bars(bars_count, seed=0), bars)
        data = load_dataset(bars, DataConfig(test_fraction=0))  # the original 80/20 split
        report["workload"] = {"bars": bars_count, "train_samples": len(data.train_index),
                              "val_samples": len(data.val_index), "batch_size": 512, "model": model.to_dict()}
        if kernel is not None and device == "cuda":
            report["parity"] = {p: parity(p) for p in ("fp32", "bf16")}
        report["epoch"] = {p: epoch_seconds(data, model, device, p) for p in ("fp32", "bf16")}
        report["epoch"]["anchor_original_rtx4090_s"] = round(1.86 * 60, 1)
        report["memory"] = memory(data, model, device, [256, 512, 1024, 2048, 4096])
        if not args.skip_sweep:
            report["sweep"] = packed_sweep(bars, Path(folder), model, device)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
