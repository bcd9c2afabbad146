"""Small checks run on each node of a Ray cluster: what it has, and what it can reach.

Each probe is a zero-CPU Ray task pinned to one node, so it runs even on a node whose CPUs
are all taken, and answers for that node only. `mamba-tune doctor` and the sweep's storage
check use them; they return plain values and never raise for what they find.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import socket
import sys
import urllib.request
import uuid
from typing import Any

import pyarrow.fs
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tuning.cluster.gpu_ready import driver_facts, smi, torch_facts
from tuning.search.resources import HEAD_RESOURCE
from tuning.sweep_files import is_uri

PACKAGES = ("ray", "torch", "mamba-ssm", "mlflow", "optuna")
PROBE_TIMEOUT_S = 60.0  # a node that has not answered by then is reported as not answering


class ProbeFailed(Exception):
    """A probe could not run on its node: not in time, the node is gone, or mamba-tune is not installed there."""


def alive_nodes() -> list[dict[str, Any]]:
    """ray.nodes() of the alive nodes, the head first."""
    return sorted((node for node in ray.nodes() if node["Alive"]), key=lambda node: not is_head(node))


def is_head(node: dict[str, Any]) -> bool:
    return HEAD_RESOURCE in node["Resources"]


def label(node: dict[str, Any]) -> str:
    """"10.0.0.5 (3b3cf129)": its address, and its id's start (nodes on one machine share an address)."""
    return f"{node['NodeManagerAddress']} ({node['NodeID'][:8]})"


def on_nodes(probe: Any, nodes: list[dict[str, Any]], *args: Any) -> list[Any]:
    """probe(*args) run once on each node -> its results; raises ProbeFailed naming the first node that failed."""
    task = ray.remote(num_cpus=0, max_retries=0)(probe)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
            .remote(*args) for node in nodes]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    results = []
    for node, ref in zip(nodes, refs, strict=True):
        if ref not in ready:
            raise ProbeFailed(f"node {label(node)} did not answer within {PROBE_TIMEOUT_S:g} s")
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayError as exc:  # the node died, or the probe could not import there
            cause = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise ProbeFailed(f"node {label(node)} could not run the check ({cause[:200]})") from None
    return results


def node_facts() -> dict[str, Any]:
    """This node: host name, Python and package versions, GPUs as nvidia-smi lists them, why mamba-ssm's fused
    kernels do not load here ("" when they do), and where nvidia-smi answers, its driver and what torch sees
    ("driver" and "torch_gpu": tuning/cluster/gpu_ready.py's DriverFacts and TorchFacts as dicts; else None)."""
    from model.backend import load_fused_kernel

    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    driver = driver_facts()
    return {"host": socket.gethostname(), "python": platform.python_version(), "executable": sys.executable,
            "versions": versions, "gpus": _gpus(), "kernels_missing": load_fused_kernel()[1],
            "driver": dataclasses.asdict(driver) if driver else None,
            "torch_gpu": dataclasses.asdict(torch_facts(kernels=False)) if driver else None}


def _gpus() -> list[dict[str, Any]]:
    """[{"name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559}, ...]; [] without nvidia-smi or a GPU."""
    listed = smi("--query-gpu=name,memory.total", "--format=csv,noheader,nounits")
    if listed is None:
        return []
    gpus = []
    for line in listed.strip().splitlines():
        name, _, memory = line.rpartition(",")
        gpus.append({"name": name.strip(), "memory_mb": int(memory) if memory.strip().isdigit() else None})  # "[N/A]"
    return gpus


def sees_file(path: str) -> bool:
    """Whether this node sees the file at a local `path`."""
    return os.path.exists(path)


def storage_write_error(storage: str) -> str | None:
    """Write, read back and delete a small file in `storage` (a path or URI) from this node; None, or what failed."""
    try:
        if is_uri(storage):
            fs, base = pyarrow.fs.FileSystem.from_uri(storage)
        else:
            fs, base = pyarrow.fs.LocalFileSystem(), os.path.abspath(os.path.expanduser(storage))
        path = f"{base.rstrip('/')}/.mamba-tune-probe-{uuid.uuid4().hex}"
        fs.create_dir(base, recursive=True)
        with fs.open_output_stream(path) as out:
            out.write(b"mamba-tune")
        with fs.open_input_stream(path) as stream:
            if stream.read() != b"mamba-tune":
                return "a file written there read back different"
        fs.delete_file(path)
    except Exception as exc:  # noqa: BLE001 - permission, missing bucket, credentials, network: all reported
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    return None


def url_error(url: str, timeout_s: float = 5.0) -> str | None:
    """GET `url` from this node; None when it answers 200, else what went wrong."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - http(s) only, checked by caller
            return None if response.status == 200 else f"HTTP {response.status}"
    except Exception as exc:  # noqa: BLE001 - refused, timeout, DNS, HTTP error: all reported
        return str(getattr(exc, "reason", None) or exc)[:300]
