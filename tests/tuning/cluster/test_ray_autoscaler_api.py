"""Ray's private APIs tuning/cluster/ray_autoscaler_api.py reads the autoscaler's node types through, pinned to
Ray 2.60: a Ray that renames, moves or reshapes one fails here, loudly, instead of a sweep quietly planning for
no GPU. The live read from a running autoscaler: tests/cluster/test_autoscaler_live.py (faults tier)."""

from __future__ import annotations

import inspect
from pathlib import Path

import ray
import ray._private.services
import ray._private.state
from ray.core.generated import autoscaler_pb2

from tuning.cluster.autoscaler import autoscaled_nodes
from tuning.cluster.ray_autoscaler_api import (
    UNLIMITED_NODES,
    monitor_config_path,
    node_types_of_cluster_config,
)

RAY = Path(ray.__file__).parent


def test_ray_is_the_version_the_private_apis_were_read_from():
    assert ray.__version__ == "2.60.0"  # on another Ray, re-read the APIs below in its source, then move the pin


def test_the_gcs_cluster_config_api_is_there_with_its_node_group_fields():
    assert callable(ray._private.state.state.get_cluster_config)
    fields = {field.name for field in autoscaler_pb2.NodeGroupConfig.DESCRIPTOR.fields}
    assert {"resources", "min_count", "max_count", "name"} <= fields
    assert {f.name for f in autoscaler_pb2.ClusterConfig.DESCRIPTOR.fields} >= {"node_group_configs", "max_resources"}


def test_node_types_of_cluster_config_reads_each_group_and_bounds_an_unlimited_one():
    reported = autoscaler_pb2.ClusterConfig(node_group_configs=[
        autoscaler_pb2.NodeGroupConfig(name="gpu", resources={"CPU": 4, "GPU": 1}, max_count=2),
        autoscaler_pb2.NodeGroupConfig(name="cpu", resources={"CPU": 8}, max_count=-1)])
    config = node_types_of_cluster_config(reported)
    assert config["available_node_types"]["gpu"] == {"resources": {"CPU": 4.0, "GPU": 1.0}, "max_workers": 2}
    nodes = autoscaled_nodes(config)
    assert nodes[:2] == [{"CPU": 4.0, "GPU": 1.0}] * 2 and nodes[2:] == [{"CPU": 8.0}] * UNLIMITED_NODES


def test_the_autoscaler_monitor_is_started_with_its_gcs_address_and_config_file_as_arguments():
    source = inspect.getsource(ray._private.services.start_monitor)
    assert 'f"--gcs-address={gcs_address}"' in source
    assert '"--autoscaling-config=" + str(autoscaling_config)' in source
    assert (RAY / "autoscaler" / "v2" / "monitor.py").is_file() and (RAY / "autoscaler/_private/monitor.py").is_file()


def test_monitor_config_path_finds_the_monitor_of_this_clusters_gcs_only(tmp_path):
    def process(pid: int, *args: str) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes("\0".join(args).encode() + b"\0")

    monitor = "/venv/lib/python3.11/site-packages/ray/autoscaler/v2/monitor.py"
    process(10, "python", "-u", monitor, "--gcs-address=10.0.0.1:6379", "--autoscaling-config=/a.yaml")
    process(11, "python", "-u", monitor, "--gcs-address=10.0.0.2:6379", "--autoscaling-config=/b.yaml")
    process(12, "python", "-u", "/ray/_private/log_monitor.py", "--gcs-address=10.0.0.3:6379")
    process(13, "python", "-u", monitor, "--gcs-address=10.0.0.4:6379")  # a head started without a config
    assert monitor_config_path("10.0.0.2:6379", tmp_path) == Path("/b.yaml")
    assert monitor_config_path("10.0.0.3:6379", tmp_path) is None  # another monitor: not the autoscaler's
    assert monitor_config_path("10.0.0.4:6379", tmp_path) is None
    assert monitor_config_path("10.0.0.9:6379", tmp_path) is None


def test_kuberays_own_config_derivation_and_api_client_are_there():
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr
    from ray.autoscaler._private.kuberay.node_provider import KubernetesHttpApiClient

    assert list(inspect.signature(_derive_autoscaling_config_from_ray_cr).parameters) == ["ray_cr"]
    assert "namespace" in inspect.signature(KubernetesHttpApiClient).parameters
    assert callable(KubernetesHttpApiClient.get)
