"""The nodes a cluster made by `ray up` may launch: its autoscaler's config, which `ray up` leaves on the head.

A cluster whose GPU nodes scale from zero has none of them up when a sweep starts: the sweep
plans its concurrency, and checks its storage, for the nodes to come as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

AUTOSCALER_CONFIG = Path("~/ray_bootstrap_config.yaml").expanduser()


def launchable_nodes(path: Path = AUTOSCALER_CONFIG) -> list[dict[str, float]]:
    """The worker nodes the autoscaler may launch (their resources), or [] without a readable config."""
    try:
        return autoscaled_nodes(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError):  # absent, or not a config we know
        return []


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

