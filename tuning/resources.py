"""How many trials run at once, and what each trial's Ray Train workers ask for.

Pure arithmetic over the cluster's nodes (no Ray here), so a request the cluster can
never hold fails before anything starts, saying what was asked and what is there,
instead of workers waiting forever for resources that will not come.

A trial is one Tune function trainable (the trial driver: it asks for one byte of memory,
so it takes no CPU from the workers) and its TorchTrainer's workers, each one bundle of
{CPU: cpus_per_worker, GPU: gpus_per_trial / workers} placed on any node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuning.space import ResourceConfig

TRIAL_DRIVER_RESOURCES = {"memory": 1}  # Tune needs a non-empty request; this one never competes with workers


class ResourceError(Exception):
    """The cluster can never run one trial as configured."""


@dataclass(frozen=True)
class TrialPlan:
    workers: int  # Ray Train workers per trial
    cpus_per_worker: float
    gpus_per_worker: float  # a fraction packs several trials' workers on one GPU
    concurrency: int  # trials running at once

    def worker_resources(self) -> dict[str, float]:
        return {"CPU": self.cpus_per_worker, **({"GPU": self.gpus_per_worker} if self.gpus_per_worker else {})}

    def describe(self) -> str:
        gpu = f" + {self.gpus_per_worker:g} GPU" if self.gpus_per_worker else ""
        return (f"{self.concurrency} trial(s) at once, each {self.workers} worker(s) of "
                f"{self.cpus_per_worker:g} CPU{gpu}")


def plan_trials(config: ResourceConfig, nodes: list[dict[str, Any]]) -> TrialPlan:
    """The plan for `config` on a cluster whose alive nodes have `nodes` resources ({"CPU": 2.0, "GPU": 1.0})."""
    cpu, workers = config.cpus_per_worker, config.workers
    gpu = config.gpus_per_trial / workers
    if gpu > 1 and gpu != int(gpu):
        raise ResourceError(f"resources: gpus_per_trial {config.gpus_per_trial:g} over {workers} worker(s) is "
                            f"{gpu:g} GPU a worker, and Ray gives a worker above one GPU only whole GPUs; "
                            "make gpus_per_trial / workers a whole number or at most 1")
    bundles = sum(_bundles_on(node, cpu, gpu) for node in nodes)  # worker bundles the whole cluster holds
    if bundles < workers:
        asked = f"{workers} worker(s) of {cpu:g} CPU" + (f" and {gpu:g} GPU" if gpu else "") + " each"
        raise ResourceError(f"resources: a trial asks for {asked}, the cluster ({describe_cluster(nodes)}) can hold "
                            f"{bundles} such worker(s); lower resources.workers, cpus_per_worker or gpus_per_trial, "
                            "or add nodes")
    concurrency = bundles // workers
    if config.max_concurrent is not None:
        concurrency = min(concurrency, config.max_concurrent)
    return TrialPlan(workers, cpu, gpu, concurrency)


def _bundles_on(node: dict[str, Any], cpu: float, gpu: float) -> int:
    """How many worker bundles of (cpu, gpu) one node holds."""
    fits = math.floor(node.get("CPU", 0.0) / cpu + 1e-9)
    if gpu > 0:
        fits = min(fits, math.floor(node.get("GPU", 0.0) / gpu + 1e-9))
    return fits


def describe_cluster(nodes: list[dict[str, Any]]) -> str:
    cpus = sum(node.get("CPU", 0.0) for node in nodes)
    gpus = sum(node.get("GPU", 0.0) for node in nodes)
    return f"{len(nodes)} node(s), {cpus:g} CPU, {gpus:g} GPU"
