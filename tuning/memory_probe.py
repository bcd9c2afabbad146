"""Before a sweep: which batch sizes fit in a trial worker's memory, measured, not guessed.

The probe runs as one Ray task with a trial worker's own resources (so on a GPU node when
trials use GPUs), measures the peak memory of training at each candidate batch size
(model/step_memory.py: fit itself on one batch), and the sweep drops from its space the batch
sizes whose peak exceeds the budget:
  GPU: the worker's share of its GPU (gpus_per_trial / workers x the GPU's memory), less
       the CUDA context each worker process holds (model/step_memory.CUDA_CONTEXT_BYTES);
  CPU: --memory-budget MB a worker, when given (without it nothing is probed on CPU).
On GPU --memory-budget, when given, replaces the share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tuning.errors import UsageError
from tuning.resources import TrialPlan
from tuning.run_config import RunConfig
from tuning.space import Choice, SweepSpace

MB = 2**20


@dataclass(frozen=True)
class ProbeResult:
    device: str  # "cpu", or the GPU's name
    budget_bytes: int  # what one trial worker may use for training
    budget_source: str  # "--memory-budget" | "GPU share"
    peaks: dict[int, int]  # batch size -> measured peak bytes
    kept: tuple[int, ...]
    removed: tuple[int, ...]

    def describe(self) -> str:
        """One line: the budget, each batch size's peak, what was removed."""
        sizes = ", ".join(f"{b}: {self.peaks[b] / MB:,.0f} MB" for b in sorted(self.peaks))
        removed = f"; removed batch size(s) {', '.join(map(str, self.removed))}" if self.removed else "; all fit"
        return (f"memory probe on {self.device}, budget {self.budget_bytes / MB:,.0f} MB a worker "
                f"({self.budget_source}): {sizes}{removed}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "peaks": {str(b): v for b, v in self.peaks.items()}}


def candidate_batch_sizes(space: SweepSpace) -> tuple[int, ...]:
    """The batch sizes trials may use: the searched choices, else the run's one."""
    spec = space.search.get("batch_size")
    return tuple(sorted(spec.choices)) if isinstance(spec, Choice) else (space.run.train.batch_size,)


def measure(run: dict[str, Any], dataset: Any, batch_sizes: tuple[int, ...], workers: int,
            budget_bytes: int | None, gpu_fraction: float) -> ProbeResult:
    """In the probe's Ray task: each batch size's peak (as one of `workers` workers sees it) and the verdict."""
    import ray
    import torch

    from model.step_memory import CUDA_CONTEXT_BYTES, step_peak_bytes
    from model.train import resolve_device

    config = RunConfig.from_dict(run)
    data = ray.get(dataset) if isinstance(dataset, ray.ObjectRef) else dataset
    device = resolve_device(config.train.device if gpu_fraction else "cpu")
    source = "--memory-budget"
    if budget_bytes is None:
        total = torch.cuda.get_device_properties(device).total_memory
        budget_bytes, source = int(total * gpu_fraction) - CUDA_CONTEXT_BYTES, "GPU share"
    train = dataclasses.replace(config.train, device=device.type)
    step_peak_bytes(config.model, dataclasses.replace(train, batch_size=min(batch_sizes)), data)  # warm-up: lazy inits
    peaks = {}
    for batch in batch_sizes:  # a worker trains on its 1/workers share of each batch
        share = -(-batch // workers)
        peaks[batch] = step_peak_bytes(config.model, dataclasses.replace(train, batch_size=share), data)
    kept = tuple(b for b in batch_sizes if peaks[b] <= budget_bytes)
    name = "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device)
    return ProbeResult(name, budget_bytes, source, peaks, kept, tuple(b for b in batch_sizes if b not in kept))


def run_probe(space: SweepSpace, dataset: Any, plan: TrialPlan, budget_mb: float | None) -> ProbeResult | None:
    """The probe as a Ray task with one trial worker's resources; None when there is nothing to probe against."""
    import ray

    if plan.gpus_per_worker == 0 and budget_mb is None:
        return None
    resources = plan.worker_resources()
    task = ray.remote(measure).options(num_cpus=resources.pop("CPU"), num_gpus=resources.pop("GPU", 0),
                                       resources=resources, max_retries=0)
    budget = None if budget_mb is None else int(budget_mb * MB)
    return ray.get(task.remote(space.run.to_dict(), dataset, candidate_batch_sizes(space), plan.workers, budget,
                               plan.gpus_per_worker))


def restrict_space(values: dict[str, Any], result: ProbeResult) -> dict[str, Any]:
    """The space's plain values without the removed batch sizes (searched choices and initial points).

    Raises UsageError when no batch size fits.
    """
    if not result.kept:
        smallest = min(result.peaks)
        raise UsageError(f"no batch size fits in a trial worker's memory: batch size {smallest} needs "
                         f"{result.peaks[smallest] / MB:,.0f} MB, the budget is {result.budget_bytes / MB:,.0f} MB "
                         f"({result.budget_source}); use smaller batch sizes, a smaller model, more GPU per trial "
                         "or a larger --memory-budget")
    if not result.removed:
        return values
    search = dict(values["search"])
    if "batch_size" in search:
        search["batch_size"] = {"choices": list(result.kept)}
    initial = [p for p in values.get("initial") or [] if p.get("batch_size") not in result.removed]
    return {**values, "search": search, "initial": initial}
