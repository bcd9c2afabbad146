"""Before a sweep: which batch sizes fit in a trial worker's memory, measured, not guessed.

The probe runs as one Ray task with a trial worker's own resources (so on a GPU node when
trials use GPUs), measures the peak memory of training at each candidate batch size
(model/step_memory.py: fit itself on one batch) of the largest configuration the space can sample
(tuning/search/largest.py: its largest window, width and depth), and the sweep drops from its space the batch
sizes whose peak exceeds the budget:
  GPU: the worker's share of the memory free on its GPU (gpus_per_trial / workers x what
       torch.cuda.mem_get_info reports free: another process's memory is not the sweep's), less
       the CUDA context each worker process holds (model/step_memory.CUDA_CONTEXT_BYTES);
  CPU: --memory-budget MB a worker, when given (without it nothing is probed on CPU).
On GPU --memory-budget, when given, replaces the share. With gpus_per_trial `auto` the probe runs
with a whole GPU and the sweep packs as many trials on each GPU as the largest batch size that
fits allows in the free memory (at most MAX_PER_GPU).

The probe's process ends once it has measured (the task's max_calls=1), its cache emptied before, so
its CUDA context and cached blocks leave the GPU before the trials come. Each packed trial worker
(below one GPU a worker) is then held to its budget: its allocator may use memory_fraction of the
GPU's memory (torch.cuda.set_per_process_memory_fraction, in tuning/sweep/trial_worker.py), so a
worker that outgrows its share fails alone instead of taking its neighbours' memory.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model.step_memory import CUDA_CONTEXT_BYTES, MB, MemoryProbeError, step_peak_bytes
from tuning.errors import UsageError
from tuning.search.largest import largest_run
from tuning.search.recipe import TrainingRecipe
from tuning.search.resources import ResourceError, TrialPlan
from tuning.search.searchable import names_of, value_of_setting
from tuning.search.space import AUTO, Choice, SweepSpace
from tuning.tracking.store import first_line

BATCH_SIZE = "train.batch_size"  # the setting the probe measures, by whichever name a space searches it
MAX_PER_GPU = 8  # trials packed on one GPU at most: beyond that, its compute, not its memory, is the limit


@dataclass(frozen=True)
class ProbeResult:
    device: str  # "cpu", or the GPU's name
    budget_bytes: int  # what one trial worker may use for training
    budget_source: str  # "--memory-budget" | "GPU share"
    peaks: dict[int, int | None]  # batch size -> measured peak bytes; None: out of memory (larger ones: not tried)
    kept: tuple[int, ...]
    removed: tuple[int, ...]
    per_gpu: int | None = None  # on GPU: trials of the largest kept batch size that fit on one GPU
    # On GPU: its memory free as the probe started (its own CUDA context taken) and in all. None: on CPU, or a
    # sweep.json written before they were kept.
    free_bytes: int | None = None
    total_bytes: int | None = None
    # The fraction of its GPU's memory each packed trial worker's allocator is held to (memory_fraction below);
    # None: not packed (a GPU or more a worker, or on CPU), or a sweep.json written before.
    memory_fraction: float | None = None

    def describe(self) -> str:
        """One line: the budget, each batch size's peak, what was removed."""
        sizes = ", ".join(f"{b}: {'out of memory' if peak is None else f'{peak / MB:,.0f} MB'}"
                          for b, peak in sorted(self.peaks.items()))
        untried = [b for b in self.removed if b not in self.peaks]
        removed = f"; removed batch size(s) {', '.join(map(str, self.removed))}" if self.removed else "; all fit"
        if untried:
            removed += f" ({', '.join(map(str, untried))} not measured: a smaller one did not fit)"
        packing = f"; {self.per_gpu} such worker(s) of batch {max(self.kept)} fit on one GPU" \
            if self.per_gpu and self.kept else ""
        if self.memory_fraction is not None:
            packing += f"; each worker held to {self.memory_fraction:.1%} of the GPU's memory"
        free = f" ({self.free_bytes / MB:,.0f} of {self.total_bytes / MB:,.0f} MB free)" \
            if self.free_bytes is not None and self.total_bytes is not None else ""
        return (f"memory probe on {self.device}{free}, budget {self.budget_bytes / MB:,.0f} MB a worker "
                f"({self.budget_source}): {sizes}{removed}{packing}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "peaks": {str(b): v for b, v in self.peaks.items()}}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ProbeResult:
        """The result as sweep.json keeps it (to_dict's JSON); a key an older sweep.json lacks takes its default."""
        return cls(**{**values, "peaks": {int(b): v for b, v in values["peaks"].items()},
                      "kept": tuple(values["kept"]), "removed": tuple(values["removed"])})


def candidate_batch_sizes(space: SweepSpace) -> tuple[int, ...]:
    """The batch sizes trials may use: the searched choices, else the run's one."""
    spec = value_of_setting(space.search, BATCH_SIZE)  # by either of its names
    return tuple(sorted(spec.choices)) if isinstance(spec, Choice) else (space.run.train.batch_size,)


def gpu_budget(bytes_available: int, gpus_per_worker: float) -> int:
    """A worker's share of its GPU's available (free) memory less its CUDA context; a worker holding several GPUs
    trains on one of them."""
    return int(bytes_available * min(gpus_per_worker, 1.0)) - CUDA_CONTEXT_BYTES


def trials_per_gpu(bytes_available: int, peak_bytes: int) -> int:
    """Workers of this peak that fit in a GPU's available (free) memory, each with its CUDA context (at least 1, at
    most MAX_PER_GPU)."""
    return max(1, min(MAX_PER_GPU, bytes_available // (peak_bytes + CUDA_CONTEXT_BYTES)))


def memory_fraction(budget_bytes: int, free_bytes: int, total_bytes: int, gpus_per_worker: float,
                    per_gpu: int | None, packs: bool) -> float | None:
    """The fraction of its GPU's memory a packed trial worker's allocator is held to: its budget / the GPU's total
    (torch.cuda.set_per_process_memory_fraction counts against the total; the CUDA context is outside it).

    The budget: with `packs` (gpus_per_trial auto) the free memory over the `per_gpu` trials packed on the GPU, less
    a CUDA context each; with a share below one GPU a worker, the probe's budget (the share of the free memory less
    the context, or --memory-budget). None where a worker has its GPU to itself (a share of 1 or more, auto packing
    one a GPU): nothing to hold it to."""
    if packs:
        if per_gpu is None or per_gpu <= 1:
            return None
        budget_bytes = free_bytes // per_gpu - CUDA_CONTEXT_BYTES
    elif not 0 < gpus_per_worker < 1:
        return None
    return min(1.0, max(budget_bytes, 0) / total_bytes)


def worker_batch(batch: int, n_train: int, workers: int) -> int:
    """The samples one of `workers` data-parallel workers runs of a batch (a batch beyond the data is all of it)."""
    return -(-min(batch, n_train) // workers)


def peaks_until_over(peak_of: Callable[[int], int | None], batch_sizes: tuple[int, ...],
                     budget_bytes: int) -> dict[int, int | None]:
    """Each batch size's peak (None: out of memory), smallest first, until one does not fit: larger ones would not."""
    peaks: dict[int, int | None] = {}
    for batch in sorted(batch_sizes):
        peaks[batch] = peak_of(batch)
        if peaks[batch] is None or peaks[batch] > budget_bytes:
            break
    return peaks


def measure(run: dict[str, Any], dataset: Any, batch_sizes: tuple[int, ...], workers: int,
            budget_bytes: int | None, gpus_per_worker: float, packs: bool = False) -> ProbeResult:
    """In the probe's Ray task: each batch size's peak (as one of `workers` workers sees it) and the verdict.

    `packs`: gpus_per_trial auto, whose trials the sweep packs by the result's per_gpu."""
    import ray
    import torch

    from model.training import resolve_device

    config = TrainingRecipe.from_dict(run)
    data = ray.get(dataset) if isinstance(dataset, ray.ObjectRef) else dataset
    device = resolve_device(config.train.device if gpus_per_worker else "cpu")
    source, free, total = "--memory-budget", None, None
    if device.type == "cuda":  # what is free now: other processes' memory, and this one's CUDA context, taken
        free, total = torch.cuda.mem_get_info(device)
    if budget_bytes is None:
        if device.type != "cuda":
            raise MemoryProbeError(f"the trial worker holds {gpus_per_worker:g} GPU but its training runs on "
                                   f"{device.type} (train.device {config.train.device!r}, CUDA available: "
                                   f"{torch.cuda.is_available()})")
        budget_bytes, source = gpu_budget(free, gpus_per_worker), "GPU share"
    train = dataclasses.replace(config.train, device=device.type)

    def peak_of(batch: int) -> int | None:
        size = worker_batch(batch, len(data.train_index), workers)
        try:
            return step_peak_bytes(config.model, dataclasses.replace(train, batch_size=size), data)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            return None

    peak_of(min(batch_sizes))  # warm-up: lazy initialisation and kernel compilation are not the step's
    peaks = peaks_until_over(peak_of, batch_sizes, budget_bytes)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the cached blocks back to the GPU now; the process itself ends too (max_calls=1)
    kept = tuple(b for b in batch_sizes if (peaks.get(b) or math.inf) <= budget_bytes)
    removed = tuple(b for b in batch_sizes if b not in kept)
    if device.type != "cuda":
        return ProbeResult("cpu", budget_bytes, source, peaks, kept, removed)
    per_gpu = trials_per_gpu(free, peaks[max(kept)]) if kept else None
    return ProbeResult(torch.cuda.get_device_name(device), budget_bytes, source, peaks, kept, removed, per_gpu, free,
                       total, memory_fraction(budget_bytes, free, total, gpus_per_worker, per_gpu, packs))


def probe_task(plan: TrialPlan) -> Any:
    """The probe as a Ray task with one trial worker's resources, in a worker process that ends once it has
    measured (max_calls=1), so that neither its CUDA context nor its cache stays on the GPU the trials then share.

    max_calls goes to ray.remote: Ray 2.60 refuses it in .options() (ray/_common/ray_option_utils.py,
    validate_task_options: "Setting 'max_calls' is not supported in '.options()'"), and sets it to 1 by itself
    only for a function given num_gpus in ray.remote, not in .options (ray/remote_function.py, RemoteFunction
    __init__), which is where this task's GPU share is given."""
    import ray

    resources = plan.worker_resources()
    return ray.remote(max_calls=1)(measure).options(num_cpus=resources.pop("CPU"), num_gpus=resources.pop("GPU", 0),
                                                    resources=resources, max_retries=0)


def run_probe(space: SweepSpace, dataset: Any, plan: TrialPlan, budget_mb: float | None) -> ProbeResult | None:
    """The probe as a Ray task with one trial worker's resources; None when there is nothing to probe against.

    Raises ResourceError when the probe cannot run (its one line says why)."""
    import ray

    if plan.gpus_per_worker == 0 and budget_mb is None:
        return None
    task = probe_task(plan)
    budget = None if budget_mb is None else int(budget_mb * MB)
    run = largest_run(space.search, space.run)  # the largest model and window a trial may get: it must fit too
    from model.data import dataset_for

    dataset = dataset_for(dataset, space.run.data, run.data)
    try:
        return ray.get(task.remote(run.to_dict(), dataset, candidate_batch_sizes(space), plan.workers, budget,
                                   plan.gpus_per_worker, space.resources.gpus_per_trial == AUTO))
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None) or exc
        raise ResourceError(f"the memory probe failed on a trial worker: {first_line(cause)}; check the node with "
                            "`mamba-tune doctor`, or give --memory-budget") from None


def pack_trials(values: dict[str, Any], result: ProbeResult) -> dict[str, Any]:
    """For gpus_per_trial auto: the space's values with the packing the probe found (each worker 1/per_gpu GPU)."""
    if result.per_gpu is None:
        raise ResourceError("resources.gpus_per_trial auto needs the memory probe on a GPU, and it ran on "
                            f"{result.device}; set train.device to cuda or auto, or give gpus_per_trial a number")
    resources = values["resources"]
    share = resources.get("workers", 1) / result.per_gpu
    return {**values, "resources": {**resources, "gpus_per_trial": share}}


def restrict_space(values: dict[str, Any], result: ProbeResult) -> dict[str, Any]:
    """The space's plain values without the removed batch sizes (searched choices and initial points).

    Raises UsageError when no batch size fits.
    """
    if not result.kept:
        smallest = min(result.peaks)
        needs = "more than the device has" if result.peaks[smallest] is None else \
            f"{result.peaks[smallest] / MB:,.0f} MB"
        raise UsageError(f"no batch size fits in a trial worker's memory: batch size {smallest} needs "
                         f"{needs}, the budget is {result.budget_bytes / MB:,.0f} MB "
                         f"({result.budget_source}); use smaller batch sizes, a smaller model, more GPU per trial "
                         "or a larger --memory-budget")
    if not result.removed:
        return values
    search = dict(values["search"])
    names = names_of(BATCH_SIZE)  # the setting's names, in search and in initial points
    for key in names:
        if key in search:
            search[key] = {"choices": list(result.kept)}
    initial = [p for p in values.get("initial") or [] if not any(p.get(key) in result.removed for key in names)]
    return {**values, "search": search, "initial": initial}
