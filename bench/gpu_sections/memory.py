"""Section 5, memory: each batch size's measured peak, the CUDA context a process holds, then packed trials.

1. In a process of its own (as the sweep's probe task), model/step_memory.py's step_peak_bytes at batch
   128, 256, 512 and 1024, fp32 and bf16, of the default model; the context this process holds beside the
   allocator (total - free by torch.cuda.mem_get_info, less torch.cuda.memory_reserved), at start and after
   training, against the 600 MB model/step_memory.py assumes; and the memory free once its cache is
   emptied. The process then ends, as the probe's does, giving its context back.
2. The sweep's own rules (tuning/sweep/memory_probe.py) on what was measured: the largest batch size whose
   fp32 peak (the sweep's default precision) fits in `gpu_budget(free, 1.0)` (the free memory less one CUDA
   context, as the probe of a trial with a whole GPU judges it), `trials_per_gpu(free, peak)` of it, and, on
   CUDA, `memory_fraction(...)` of gpus_per_trial auto: the fraction of the GPU's memory each packed worker's
   allocator is held to (the free memory over the packed trials, less a context each, of the total).
3. One process training two epochs at that batch size, then that many processes at once, each held to that
   fraction by torch.cuda.set_per_process_memory_fraction as the sweep holds its packed workers, starting
   epoch 2 together: out-of-memory errors (there should be none) and the samples/s of epoch 2 summed,
   against the one process's.
With --cpu-smoke the same on CPU (peaks: the resident set; free: MemAvailable; at most two processes, not held:
there is no allocator fraction on CPU).
"""

from __future__ import annotations

import dataclasses
import queue
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.gpu_sections.context import SectionContext, bars_file, cuda_available, first_line, require_cuda, workload

MB = 2**20
SMOKE_MAX_PROCESSES = 2


def run(context: SectionContext) -> dict[str, Any]:
    import multiprocessing

    from tuning.sweep.memory_probe import gpu_budget, memory_fraction, trials_per_gpu

    if not context.smoke:
        require_cuda()
    start = time.monotonic()
    work = workload(context)
    device = "cuda" if cuda_available() else "cpu"
    bars = bars_file(context, work.bars)
    spawn = multiprocessing.get_context("spawn")  # a fresh process: no CUDA state inherited, none left behind
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        measured = pool.submit(measure, bars, work, device).result()
    fp32 = {int(b): peak for b, peak in measured["peaks_mb"]["fp32"].items()}
    free = int(measured["free_mb"] * MB)
    budget = gpu_budget(free, 1.0)  # as the probe judges a batch size for a worker with a whole GPU
    fitting = [b for b, peak in fp32.items() if peak is not None and peak * MB <= budget]
    report = {"device": device, **measured}
    if not fitting:
        return report | {"packing": "no batch size fits in the free memory"}
    batch = max(fitting)
    count = trials_per_gpu(free, int(fp32[batch] * MB))
    if context.smoke:
        count = min(count, SMOKE_MAX_PROCESSES)
    fraction = None  # on CPU there is no allocator fraction to hold a process to
    if device == "cuda":
        fraction = memory_fraction(budget, free, int(measured["total_mb"] * MB), 1.0, count, packs=True)
    report["packing"] = {"batch_size": batch, "precision": "fp32", "peak_mb": fp32[batch],
                         "budget_mb": round(budget / MB), "trials_per_gpu": count, "memory_fraction_each": fraction,
                         "rule": "the sweep's (tuning/sweep/memory_probe.py): peak <= gpu_budget(free, 1.0), "
                                 "trials_per_gpu(free, peak), memory_fraction(..., per_gpu=trials_per_gpu, "
                                 "packs=True)"}
    deadline = start + context.timeout_s - 10
    single = train_together(1, bars, work, batch, device, None, spawn, deadline)
    report["single"] = single
    if count > 1:
        packed = train_together(count, bars, work, batch, device, fraction, spawn, deadline)
        rates = [p.get("samples_per_s") or 0 for p in packed["processes"]]
        packed["combined_samples_per_s"] = round(sum(rates))
        alone = (single["processes"][0].get("samples_per_s") or 0)
        packed["throughput_vs_single"] = round(sum(rates) / alone, 2) if alone else None
        report["packed"] = packed
    return report


def measure(bars: Path, work, device: str) -> dict[str, Any]:
    """In its own process: the peaks, the context, the memory free after (see the module's step 1)."""
    import torch

    from model.data import load_dataset
    from model.step_memory import CUDA_CONTEXT_BYTES, step_peak_bytes

    data = load_dataset(bars, work.data)
    report: dict[str, Any] = {"context_assumed_mb": round(CUDA_CONTEXT_BYTES / MB)}
    if device == "cuda":
        torch.zeros(1, device=device)  # the context, before any model
        report["gpu"] = torch.cuda.get_device_name(0)
        report["context_mb_at_start"] = context_mb()
    peaks: dict[str, dict[int, float | None]] = {}
    for precision in ("fp32", "bf16"):
        config = dataclasses.replace(work.train, batch_size=min(work.memory_batches), device=device,
                                     precision=precision)
        step_peak_bytes(work.model, config, data)  # warm-up: lazy initialisation and kernel compilation
        peaks[precision] = {}
        for batch in work.memory_batches:
            try:
                peak = step_peak_bytes(work.model, dataclasses.replace(config, batch_size=batch), data)
                peaks[precision][batch] = round(peak / MB, 1)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                peaks[precision][batch] = None
    report["peaks_mb"] = peaks
    if device == "cuda":
        report["context_mb_after_training"] = context_mb()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        report |= {"total_mb": round(total / MB), "free_mb": round(free / MB),
                   "context_how": "total - free (mem_get_info) - memory_reserved: this process's context, "
                                  "kernels and workspaces, and any other process on the GPU"}
    else:
        report["free_mb"] = round(available_bytes() / MB)
    return report


def context_mb() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return round((total - free - torch.cuda.memory_reserved()) / MB)


def available_bytes() -> int:
    """CPU: MemAvailable from /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemAvailable")


def train_together(count: int, bars: Path, work, batch: int, device: str, fraction: float | None, spawn,
                   deadline: float) -> dict[str, Any]:
    """`count` processes training at once, each held to `fraction` of the GPU's memory (None: not held); their
    answers, rank by rank."""
    barrier, answers = spawn.Barrier(count), spawn.Queue()
    processes = [spawn.Process(target=train_worker, args=(rank, bars, work, batch, device, fraction, barrier, answers))
                 for rank in range(count)]
    for process in processes:
        process.start()
    results = {}
    try:
        while len(results) < count:
            answer = answers.get(timeout=max(1.0, deadline - time.monotonic()))
            results[answer["rank"]] = answer
    except queue.Empty:
        pass
    for process in processes:
        process.join(timeout=max(1.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    rows = [results.get(rank, {"rank": rank, "error": "no answer before the section's deadline"})
            for rank in range(count)]
    return {"processes": rows, "out_of_memory": sum(bool(r.get("out_of_memory")) for r in rows),
            "memory_fraction_each": fraction}


def train_worker(rank: int, bars: Path, work, batch: int, device: str, fraction: float | None, barrier,
                 answers) -> None:
    """One packed trial: two epochs at `batch`, held to `fraction` of the GPU's memory as the sweep holds a packed
    worker (tuning/sweep/trial_worker.py), epoch 2 started with the others; its answer on `answers`."""
    import torch

    from model.data import load_dataset
    from model.train import fit

    try:
        if device == "cuda" and fraction is not None:
            torch.cuda.set_per_process_memory_fraction(fraction)
        data = load_dataset(bars, work.data)
        config = dataclasses.replace(work.train, epochs=2, batch_size=batch, device=device)

        def together(metrics: dict[str, Any], _checkpoint) -> None:
            if metrics["epoch"] == 1:
                barrier.wait(timeout=300)  # epoch 2 starts in every process at once

        result = fit(config, work.model, data, report=together)
        second = result.history[-1]
        peak = torch.cuda.max_memory_reserved() / MB if device == "cuda" else second["peak_memory_mb"]
        answers.put({"rank": rank, "status": result.status, "samples_per_s": round(second["samples_per_s"]),
                     "epoch_s": round(second["epoch_s"], 3), "peak_mb": round(peak)})
    except torch.OutOfMemoryError as exc:
        barrier.abort()
        answers.put({"rank": rank, "out_of_memory": True, "error": first_line(exc)})
    except Exception as exc:  # a broken barrier (another process failed), a CUDA error, ...
        barrier.abort()
        answers.put({"rank": rank, "error": first_line(exc)})
