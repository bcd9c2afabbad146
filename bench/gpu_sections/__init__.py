"""The sections of bench/gpu_check.py, in the order they run: each a module with `run(context) -> dict`.

A section runs in a process of its own (bench/gpu_check.py starts it, and kills it at its timeout), so a
hang, a crash or a CUDA error in one section costs that section alone. `needs_cuda`: "always" (nothing of
it runs without CUDA), "gpu-run" (it runs on CPU only with --cpu-smoke), or "never" (its CPU parts are real
everywhere; its GPU parts say "skipped: no CUDA").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    name: str  # also its module, bench.gpu_sections.<name>, whose run(context) the section's process calls
    needs_cuda: str  # "always" | "gpu-run" | "never"
    timeout_s: float  # the default; --timeout NAME=SECONDS replaces it
    what: str  # one line for --help and the report


# Each timeout is a cap, not the section's expected time: a section past it is stopped and reads "timed out", and
# `--timeout NAME=SECONDS` gives it more (a first run on a fresh machine, where Triton compiles and autotunes
# mamba_ssm's kernels before caching them on disk, may need it). The caps sum to 600 s: the check ends within
# about 10 minutes whatever hangs. Its expected run time is bench/gpu_check.py's: under 10 minutes on one GPU,
# an estimate: not yet run on one.
SECTIONS = (
    Section("environment", "never", 40,
            "driver, torch, CUDA, Triton, compute capability, kernel imports, a Triton kernel launch"),
    Section("parity", "always", 100,
            "the fused kernel against the torch SSD: outputs and gradients, fp32 (IEEE) and bf16"),
    Section("forecaster", "never", 45,
            "the Forecaster under both backends from one state_dict; a GPU checkpoint loaded on CPU"),
    Section("epoch", "gpu-run", 140,
            "epoch time of the original workload: fused and torch, fp32 and bf16, training and validation apart"),
    Section("memory", "gpu-run", 115,
            "peak memory at batch 128-1024, the CUDA context, trials_per_gpu processes at once"),
    Section("sweep", "gpu-run", 160,
            "a two-trial sweep through `mamba-tune sweep` (Ray, Optuna, MLflow)"),
)


def section_named(name: str) -> Section:
    for section in SECTIONS:
        if section.name == name:
            return section
    raise KeyError(name)
