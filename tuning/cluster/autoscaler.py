"""The nodes a cluster's autoscaler may launch: its node types, read from the running cluster where it can be.

A cluster whose GPU nodes scale from zero has none of them up when a sweep starts: the sweep
plans its concurrency, and checks its storage, for the nodes to come as well. Where the types are
read, first found first (Ray's private APIs for it: tuning/cluster/ray_autoscaler_api.py):
  1. what the autoscaler reported to the GCS (autoscalers that report it; Ray 2.60's do not);
  2. the running autoscaler's own config: its monitor's --autoscaling-config file on this node (`ray up`,
     `ray start --head --autoscaling-config`), or on KubeRay the RayCluster, read as its autoscaler reads it;
  3. ~/ray_bootstrap_config.yaml, the file `ray up` leaves on the head;
  4. nothing: the sweep plans for the nodes up now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tuning.cluster import ray_autoscaler_api as api

AUTOSCALER_CONFIG = Path("~/ray_bootstrap_config.yaml").expanduser()


@dataclass(frozen=True)
class NodeTypes:
    config: dict[str, Any]  # the autoscaler config, as `ray up` writes it (available_node_types, max_workers)
    source: str  # where it was read, for messages: "the autoscaler's config on the GCS", a file, a RayCluster


def autoscaler_node_types(path: Path = AUTOSCALER_CONFIG) -> NodeTypes | None:
    """The node types of the connected cluster's autoscaler, from the first source that has them; None: none has."""
    readers: list[Callable[[], NodeTypes | None]] = [_reported, _monitor, _kuberay, lambda: _file(path)]
    for read in readers:
        try:
            found = read()
            if found is not None and autoscaled_nodes(found.config):
                return found
        except Exception:  # noqa: BLE001 - a source that fails, or holds no config we know, is not there: the next
            continue
    return None


def launchable_nodes(path: Path = AUTOSCALER_CONFIG) -> list[dict[str, float]]:
    """The worker nodes the autoscaler may launch (their resources), or [] where no source has node types."""
    found = autoscaler_node_types(path)
    return autoscaled_nodes(found.config) if found else []


def autoscaled_nodes(config: dict[str, Any]) -> list[dict[str, float]]:
    """The worker nodes an autoscaling cluster may launch (`ray up`'s config, as on the head node), at most.

    Each node type contributes max_workers nodes of its `resources`, in the file's order, up to the
    cluster's max_workers: a sweep on a cluster that scales from zero plans for the nodes it will get.
    """
    types = config.get("available_node_types") or {}
    head, most = config.get("head_node_type"), int(config.get("max_workers", 2))  # Ray's default: 2
    nodes = [dict(spec.get("resources") or {}) for name, spec in types.items() if name != head
             for _ in range(int(spec.get("max_workers", most)))]  # a type's default: the cluster's
    return nodes[:most]


def _reported() -> NodeTypes | None:
    config = api.gcs_reported_config() if api.connected_gcs_address() else None
    return NodeTypes(config, "the autoscaler's config reported to the GCS") if config else None


def _monitor() -> NodeTypes | None:
    found = api.monitor_config()
    return NodeTypes(found[0], f"the running autoscaler's {found[1]}") if found else None


def _kuberay() -> NodeTypes | None:
    config, cluster = api.kuberay_config(), api.kuberay_cluster()
    return NodeTypes(config, f"RayCluster {cluster[0]} in namespace {cluster[1]}") if config and cluster else None


def _file(path: Path) -> NodeTypes | None:
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):  # absent, or not a config we know
        return None
    return NodeTypes(config, str(path)) if isinstance(config, dict) else None
