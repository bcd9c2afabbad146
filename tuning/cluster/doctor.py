"""`mamba-tune doctor`: what a sweep needs from a Ray cluster, checked from its nodes before hours are spent.

Nodes and their CPUs, GPUs and memory; the same Python, Ray and torch on every node; the
sweep's storage written from a worker node (and, for a folder, seen by every node); the
MLflow tracking store reached from the driver, and a server from the worker nodes. Each
check is a Finding; a "fail" is something a sweep would trip on (a GPU its torch cannot use,
mamba-ssm kernels that do not load on a GPU node), a "warn" something slower or less
convenient than it could be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from model.backend import KERNELS_FIX, TORCH_PATH_FIX
from tuning.cluster.autoscaler import autoscaled_nodes, autoscaler_node_types
from tuning.cluster.gpu_ready import DriverFacts, TorchFacts, gpu_problem
from tuning.cluster.node_probe import (
    PACKAGES,
    ProbeFailed,
    alive_nodes,
    is_head,
    label,
    node_facts,
    on_nodes,
    storage_write_error,
    url_error,
)
from tuning.cluster.shared_storage import not_shared_reason
from tuning.errors import UsageError
from tuning.search.space import RAY_BUILTIN_RESOURCES
from tuning.sweep_files import is_uri
from tuning.tracking.store import TrackingStore, open_store

SAME_EVERYWHERE = ("python", "ray")  # Ray refuses, or trials fail, when nodes differ in these
# torch is the same release on every node of a kind: the GPU nodes run the GPU workers' lock's torch
# (cluster/locks/gpu-worker.in: the newest with mamba-ssm's release kernels), the head and CPU nodes the head's
# (head.txt): a trial's workers are all of one kind (its bundle asks for GPUs or not), and checkpoints hold only
# tensors, which either torch loads.
SAME_PER_KIND = ("torch",)
DRIVER_ONLY = ("mlflow", "optuna")  # used by the sweep's driver alone


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "warn" or "fail"
    text: str
    fix: str = ""


def examine(storage: str, store: TrackingStore) -> list[Finding]:
    """Every check, on the Ray cluster this process is connected to."""
    nodes = alive_nodes()
    try:
        facts = on_nodes(node_facts, nodes)
    except ProbeFailed as exc:
        return [Finding("fail", f"nodes: {exc}", "check the node with `ray status` and that mamba-tune is installed "
                                                 "there (cluster.yaml setup_commands), or remove it")]
    here = ray.get_runtime_context().get_node_id()
    trial_nodes = [node for node in nodes if node["NodeID"] != here] or nodes  # where trials run (one node: here)
    findings = [_describe(node, fact) for node, fact in zip(nodes, facts, strict=True)]
    findings += _versions(nodes, facts)
    findings += gpus_ready(nodes, facts)
    findings += _storage(storage, nodes, trial_nodes)
    findings += _tracking(store, trial_nodes, len(nodes))
    if types := autoscaler_node_types():
        most = len(autoscaled_nodes(types.config))
        findings.append(Finding("warn", f"this cluster launches up to {most} worker node(s) as trials need them "
                                f"({types.source}): the checks above cover the nodes up now",
                                "run `mamba-tune doctor` again once a sweep has started them"))
    return findings


def _describe(node: dict[str, Any], fact: dict[str, Any]) -> Finding:
    resources = node["Resources"]
    role = "head" if is_head(node) else "worker"
    gpus = ", ".join(gpu["name"] + (f" {gpu['memory_mb'] / 1024:.0f} GiB" if gpu["memory_mb"] else "")
                     for gpu in fact["gpus"])
    custom = {k: v for k, v in resources.items()
              if k not in RAY_BUILTIN_RESOURCES and not k.startswith(("node:", "accelerator_type:"))}
    text = (f"node {label(node)}, {role} on {fact['host']}: {resources.get('CPU', 0):g} CPU, "
            f"{resources.get('GPU', 0):g} GPU{f' ({gpus})' if gpus else ''}, "
            f"{resources.get('memory', 0) / 2**30:.1f} GiB memory for tasks"
            + "".join(f", {amount:g} {name}" for name, amount in sorted(custom.items())))
    if resources.get("GPU", 0) and not fact["gpus"]:
        return Finding("warn", text + "; Ray counts GPUs that nvidia-smi does not list",
                       "check the node's NVIDIA driver (nvidia-smi)")
    return Finding("ok", text)


def _versions(nodes: list[dict[str, Any]], facts: list[dict[str, Any]]) -> list[Finding]:
    here = node_facts()
    findings = []
    gpu_nodes = [(node, fact) for node, fact in zip(nodes, facts, strict=True) if node["Resources"].get("GPU", 0)]
    cpu_nodes = [(node, fact) for node, fact in zip(nodes, facts, strict=True) if not node["Resources"].get("GPU", 0)]
    groups = [(package, "", list(zip(nodes, facts, strict=True))) for package in SAME_EVERYWHERE]
    groups += [(package, kind, members) for package in SAME_PER_KIND
               for kind, members in ((" GPU", gpu_nodes), (" CPU", cpu_nodes)) if members]
    for package, kind, members in groups:
        seen: dict[str | None, list[str]] = {}
        for node, fact in members:
            version = fact["python"] if package == "python" else release(fact["versions"][package])
            seen.setdefault(version, []).append(label(node))
        if len(seen) > 1:
            where = "; ".join(f"{version or 'not installed'} on {', '.join(ips)}" for version, ips in seen.items())
            findings.append(Finding("fail", f"{package} differs between{kind} nodes: {where}",
                                    "install the same version on every node (cluster.yaml setup_commands)"))
    for package in DRIVER_ONLY:
        if here["versions"][package] is None:
            findings.append(Finding("fail", f"{package} is not installed where the sweep's driver runs",
                                    "pip install -e . on the head node"))
    listed = ", ".join(f"{package} {here['versions'][package] or 'not installed'}" for package in PACKAGES)
    kernels = " (mamba-ssm kernels load here)" if not here["kernels_missing"] else (
        " (mamba-ssm kernels: CUDA only, so nodes without a GPU run the torch path)")
    findings.append(Finding("ok", f"versions here: python {here['python']}, {listed}{kernels}"))
    return findings


def release(version: str | None) -> str | None:
    """"2.13.0" of "2.13.0+cpu": PyTorch's CPU and CUDA builds of one release are the same torch."""
    return version.split("+", 1)[0] if version else version


def gpus_ready(nodes: list[dict[str, Any]], facts: list[dict[str, Any]]) -> list[Finding]:
    """A fail for each node whose nvidia-smi answers and whose torch cannot use its GPU (tuning/cluster/gpu_ready.py),
    and one for the GPU nodes whose mamba-ssm kernels do not import: model.backend auto stops a GPU trial there."""
    findings, blind = [], set()
    for node, fact in zip(nodes, facts, strict=True):
        if fact.get("driver") is None:
            continue
        problem = gpu_problem(DriverFacts(**fact["driver"]), TorchFacts(**fact["torch_gpu"]))
        if problem:
            blind.add(node["NodeID"])
            findings.append(Finding("fail", f"node {label(node)}: {problem.what}", problem.fix))
    stopped = [f"{label(node)} ({fact['kernels_missing']})" for node, fact in zip(nodes, facts, strict=True)
               if (node["Resources"].get("GPU", 0) or fact.get("driver")) and fact["kernels_missing"]
               and node["NodeID"] not in blind]
    if stopped:
        findings.append(Finding("fail", f"mamba-ssm's fused kernels do not load on GPU node(s) {'; '.join(stopped)}: "
                                "GPU trials there stop (model.backend auto trains on the GPU with them)",
                                f"{KERNELS_FIX} there; {TORCH_PATH_FIX}"))
    return findings


def _storage(storage: str, nodes: list[dict[str, Any]], trial_nodes: list[dict[str, Any]]) -> list[Finding]:
    fix = "create it, fix its permissions or the node's credentials, or choose another --storage"
    try:
        failures = on_nodes(storage_write_error, trial_nodes, storage)
        findings = [Finding("fail", f"storage {storage}: not writable from node {label(node)} ({why})", fix)
                    for node, why in zip(trial_nodes, failures, strict=True) if why]
        if findings:
            return findings
        reason = not_shared_reason(storage, nodes)
    except ProbeFailed as exc:
        return [Finding("fail", f"storage {storage}: {exc}", "check the node with `ray status`")]
    except OSError as exc:  # the driver's own node cannot write there
        return [Finding("fail", f"storage {storage}: not writable here ({exc.strerror or exc})", fix)]
    if reason:
        return [Finding("fail", f"storage {storage}: {reason}")]
    where = ", ".join(label(node) for node in trial_nodes)
    shared = ", seen by every node" if len(nodes) > 1 and not is_uri(storage) else ""
    return [Finding("ok", f"storage {storage}: written and read back from node(s) {where}{shared}")]


def _tracking(store: TrackingStore, trial_nodes: list[dict[str, Any]], total: int) -> list[Finding]:
    try:
        open_store(store)
    except UsageError as exc:
        return [Finding("fail", str(exc))]
    except OSError as exc:  # the embedded store's folder cannot be made
        return [Finding("fail", f"tracking {store.uri}: {exc.strerror or exc}", "choose another --tracking-uri")]
    if store.embedded:
        text = f"tracking {store.uri}: reachable here (a local store: only the sweep's driver writes to it)"
        if total > 1:
            return [Finding("warn", text, "on a cluster, run `mlflow server` on the head node (cluster.yaml does) "
                                          "and pass --tracking-uri, so the runs outlive the head's disk")]
        return [Finding("ok", text)]
    try:
        failures = on_nodes(url_error, trial_nodes, f"{store.uri}/health")
    except ProbeFailed as exc:
        return [Finding("warn", f"tracking {store.uri}: reachable here; {exc}")]
    blind = [f"{label(node)}: {why}" for node, why in zip(trial_nodes, failures, strict=True) if why]
    if blind:
        return [Finding("warn", f"tracking {store.uri}: reachable from the driver, not from worker node(s) "
                                f"{'; '.join(blind)}; a sweep works (only its driver writes to MLflow)",
                        "to log from workers too, bind the server to an address they reach")]
    where = ", ".join(label(node) for node in trial_nodes)
    return [Finding("ok", f"tracking {store.uri}: reachable from the driver and from node(s) {where}")]
