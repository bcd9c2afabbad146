"""A two-node Ray cluster on this machine (a real `mlflow server` beside it: tests/conftest.py's tracking_server), and
bars in a folder both nodes see; cluster.yaml as the file tests read it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cluster.ray_cluster import RayCluster, running

TRIAL_SLOT = "trial_slot"  # the custom resource only the worker node has: trials ask for it
SPOT_SLOT = "spot_slot"  # the same, for the nodes the preemption test starts
CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"


@pytest.fixture(scope="module")
def config() -> dict:
    """cluster.yaml, parsed once a module (a test that breaks it does so on a copy)."""
    return yaml.safe_load(CLUSTER_YAML.read_text())


def worker_types(config: dict) -> dict:
    """cluster.yaml's node types other than the head's, by name."""
    return {name: spec for name, spec in config["available_node_types"].items() if name != config["head_node_type"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head (1 CPU, where the drivers run) + node "worker-a" (2 CPU, 2 trial_slot); every process killed at the end.
    tracking_server, a real `mlflow server` for the module: tests/conftest.py."""
    with running(RayCluster(tmp_path_factory.mktemp("ray-logs")), head_cpus=1, worker="worker-a", worker_cpus=2,
                 resources={TRIAL_SLOT: 2}) as ray_cluster:
        yield ray_cluster
