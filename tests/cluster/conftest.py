"""A two-node Ray cluster on this machine, a real `mlflow server` beside it, and bars in a folder both nodes see;
cluster.yaml as the file tests read it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cluster.ray_cluster import RayCluster, client_token_auth
from tests.tuning.mlflow_server import MlflowServer

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
    """Head (1 CPU, where the drivers run) + node "worker-a" (2 CPU, 2 trial_slot); every process killed at the end."""
    ray_cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"))
    with client_token_auth():
        try:
            ray_cluster.start_head(cpus=1)
            ray_cluster.add_node("worker-a", cpus=2, resources={TRIAL_SLOT: 2})
            yield ray_cluster
        finally:
            ray_cluster.stop()


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
