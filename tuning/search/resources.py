"""How many trials run at once, and what each trial's Ray Train workers ask for.

Pure arithmetic over the cluster's nodes (no Ray here), so a request the cluster can
never hold fails before anything starts, saying what was asked and what is there,
instead of workers waiting forever for resources that will not come.

A trial is one Tune function trainable (the trial driver, on the head node: it asks for the head
memory a trial uses there and no CPU, so it never competes with workers) and its TorchTrainer's
workers, each one bundle of {CPU: cpus_per_worker, GPU: gpus_per_trial / workers, **custom} placed
on any node that has them. Concurrency is capped by the workers' bundles and by the head's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.errors import InputError
from tuning.search.space import AUTO, ResourceConfig

# The request pins trial drivers (and, through them, Ray Train's controllers) to the head node, where
# the sweep's driver runs: a worker node that dies takes only workers with it, and Ray Train restarts
# them elsewhere. Its memory is what one trial adds to the head: its driver, Ray Train's controller and
# the three small actors it starts, 818 MB of unshared memory measured (bench/driver_memory.py), and on a
# cluster Ray Train's preemption watcher; so Ray places no more drivers than the head's memory holds.
HEAD_RESOURCE = "node:__internal_head__"  # Ray gives it to the head node only
TRIAL_DRIVER_MEMORY_MB = 1024
TRIAL_DRIVER_RESOURCES = {"memory": TRIAL_DRIVER_MEMORY_MB * 2**20, HEAD_RESOURCE: 0.001}


class ResourceError(InputError):
    """The cluster can never run one trial as configured."""


@dataclass(frozen=True)
class TrialPlan:
    workers: int  # Ray Train workers per trial
    cpus_per_worker: float
    gpus_per_worker: float  # a fraction packs several trials' workers on one GPU
    concurrency: int  # trials running at once
    custom: tuple[tuple[str, float], ...] = ()  # custom Ray resources per worker
    head_bound: bool = False  # concurrency is what the head's memory holds (the workers would hold more)

    def worker_resources(self) -> dict[str, float]:
        gpu = {"GPU": self.gpus_per_worker} if self.gpus_per_worker else {}
        return {"CPU": self.cpus_per_worker, **gpu, **dict(self.custom)}

    def describe(self) -> str:
        gpu = f" + {self.gpus_per_worker:g} GPU" if self.gpus_per_worker else ""
        custom = "".join(f" + {amount:g} {name}" for name, amount in self.custom)
        head = (f" (as many as the head's memory holds, {TRIAL_DRIVER_MEMORY_MB} MB a trial; a larger head runs "
                "more)") if self.head_bound else ""
        return (f"{self.concurrency} trial(s) at once, each {self.workers} worker(s) of "
                f"{self.cpus_per_worker:g} CPU{gpu}{custom}{head}")


def plan_trials(config: ResourceConfig, nodes: list[dict[str, Any]]) -> TrialPlan:
    """The plan for `config` on a cluster whose alive nodes have `nodes` resources ({"CPU": 2.0, "GPU": 1.0})."""
    cpu, workers = config.cpus_per_worker, config.workers
    gpu = 1.0 if config.gpus_per_trial == AUTO else config.gpus_per_trial / workers  # auto: a GPU, until probed
    if gpu > 1 and gpu != int(gpu):
        raise ResourceError(f"resources: gpus_per_trial {config.gpus_per_trial:g} over {workers} worker(s) is "
                            f"{gpu:g} GPU a worker, and Ray gives a worker above one GPU only whole GPUs; "
                            "make gpus_per_trial / workers a whole number or at most 1")
    bundle = {"CPU": cpu, **({"GPU": gpu} if gpu else {}), **config.custom}
    bundles = sum(_bundles_on(node, bundle) for node in nodes)  # worker bundles the whole cluster holds
    if bundles < workers:
        asked = " and ".join(f"{amount:g} {name}" for name, amount in bundle.items())
        raise ResourceError(f"resources: a trial asks for {workers} worker(s) of {asked} each, the cluster "
                            f"({describe_cluster(nodes, config.custom)}) can hold {bundles} such worker(s); lower "
                            "resources.workers, cpus_per_worker, gpus_per_trial or custom, or add nodes")
    concurrency = bundles // workers
    if config.max_concurrent is not None:
        concurrency = min(concurrency, config.max_concurrent)
    drivers = _drivers_on_head(nodes)
    head_bound = drivers is not None and drivers < concurrency
    return TrialPlan(workers, cpu, gpu, min(concurrency, drivers) if head_bound else concurrency,
                     tuple(sorted(config.custom.items())), head_bound)


def _drivers_on_head(nodes: list[dict[str, Any]]) -> int | None:
    """How many trial drivers the head node's memory holds; None where no node is marked the head, or its memory
    is not given. Raises ResourceError when it holds none."""
    head = next((node for node in nodes if HEAD_RESOURCE in node), None)
    if head is None or "memory" not in head:
        return None
    drivers = int(head["memory"] // TRIAL_DRIVER_RESOURCES["memory"])
    if drivers < 1:
        raise ResourceError(f"resources: the head node has {head['memory'] / 2**20:.0f} MB of memory for "
                            f"Ray's tasks and a trial's driver needs {TRIAL_DRIVER_MEMORY_MB} MB there; run the sweep "
                            "from a head node with more memory")
    return drivers


def fullest_plan(config: ResourceConfig, clusters: list[list[dict[str, Any]]]) -> TrialPlan:
    """The plan running the most trials at once over alternative views of the cluster (now, fully scaled).

    Raises the first view's ResourceError when none can hold a trial.
    """
    plans, errors = [], []
    for nodes in clusters:
        try:
            plans.append(plan_trials(config, nodes))
        except ResourceError as exc:
            errors.append(exc)
    if not plans:
        raise errors[0]
    return max(plans, key=lambda plan: plan.concurrency)


def gpus_on(clusters: list[list[dict[str, Any]]]) -> float:
    """The most GPUs any view of the cluster holds (now, fully scaled); 0: none has one or can be launched with one."""
    return max((sum(node.get("GPU", 0.0) for node in nodes) for nodes in clusters), default=0.0)


def _bundles_on(node: dict[str, Any], bundle: dict[str, float]) -> int:
    """How many worker bundles ({"CPU": 1, "GPU": 0.5, ...}) one node holds."""
    return min(math.floor(node.get(name, 0.0) / amount + 1e-9) for name, amount in bundle.items())


def describe_cluster(nodes: list[dict[str, Any]], custom: dict[str, float] | None = None) -> str:
    """"2 node(s), 3 CPU, 0 GPU" (and the total of each custom resource named)."""
    totals = {name: sum(node.get(name, 0.0) for node in nodes) for name in ("CPU", "GPU", *(custom or {}))}
    return f"{len(nodes)} node(s), " + ", ".join(f"{amount:g} {name}" for name, amount in totals.items())
