"""The running autoscaler's node types, read through Ray's private APIs: every use of them is here.

Pinned to Ray 2.60 (tests/cluster/test_ray_autoscaler_api.py fails when one of them changes). Each reader
returns an autoscaler config as `ray up` writes it ({"available_node_types": {name: {"resources", "max_workers"}},
"head_node_type", "max_workers"}), or None where its source is not there:

1. gcs_reported_config: the ClusterConfig an autoscaler reports to the GCS (ray._private.state.get_cluster_config,
   what Ray Data's autoscaler reads). Ray 2.60's own autoscalers, v1 and v2, never report it
   (ray-project/ray#63012), so it is None on them; read first for the autoscalers that do.
2. monitor_config: the --autoscaling-config file of the autoscaler monitor of the connected cluster, running on
   this node (the head): `ray up`'s ~/ray_bootstrap_config.yaml, or any `ray start --head --autoscaling-config`.
3. kuberay_config: in a KubeRay pod, the RayCluster read from the Kubernetes API with the pod's service account,
   turned into node types by the code KubeRay's in-tree autoscaler (v1 and v2) runs for its own config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

UNLIMITED_NODES = 64  # a node group with no maximum (max_count -1) is planned for this many nodes
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # the pod's token and namespace
MONITOR_SCRIPT = "/monitor.py"  # ray/autoscaler/_private/monitor.py (v1) and ray/autoscaler/v2/monitor.py


def gcs_reported_config() -> dict[str, Any] | None:
    """The node groups the autoscaler reported to the GCS of the connected cluster, as an autoscaler config."""
    import ray._private.state

    reported = ray._private.state.state.get_cluster_config()  # autoscaler_pb2.ClusterConfig, or None
    return node_types_of_cluster_config(reported) if reported is not None and reported.node_group_configs else None


def node_types_of_cluster_config(reported: Any) -> dict[str, Any]:
    """An autoscaler_pb2.ClusterConfig's node groups (resources, max_count; -1: no maximum) as an autoscaler config."""
    types = {group.name or f"group-{i}": {"resources": {k: float(v) for k, v in group.resources.items()},
                                         "max_workers": UNLIMITED_NODES if group.max_count < 0 else group.max_count}
             for i, group in enumerate(reported.node_group_configs)}
    return {"available_node_types": types, "max_workers": sum(t["max_workers"] for t in types.values())}


def monitor_config_path(gcs_address: str, proc: Path = Path("/proc")) -> Path | None:
    """The --autoscaling-config file of the autoscaler monitor serving the GCS at `gcs_address`, if it runs on
    this node (as `ray start --head` starts it: ray/_private/services.py start_monitor)."""
    for cmdline in proc.glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone already, or not ours to read
            continue
        if not any(arg.endswith(MONITOR_SCRIPT) for arg in args) or f"--gcs-address={gcs_address}" not in args:
            continue
        config = next((arg.split("=", 1)[1] for arg in args if arg.startswith("--autoscaling-config=")), None)
        return Path(config).expanduser() if config else None
    return None


def connected_gcs_address() -> str | None:
    """HOST:PORT of the GCS of the Ray this process is connected to; None when not connected."""
    import ray

    return ray.get_runtime_context().gcs_address if ray.is_initialized() else None


def monitor_config() -> tuple[dict[str, Any], Path] | None:
    """The running monitor's autoscaler config and its file, for the connected cluster; None when not found here."""
    address = connected_gcs_address()
    path = monitor_config_path(address) if address else None
    if path is None:
        return None
    try:
        return yaml.safe_load(path.read_text()), path  # `ray start` accepts YAML or JSON: YAML reads both
    except (OSError, yaml.YAMLError):
        return None


def kuberay_cluster() -> tuple[str, str] | None:
    """(RayCluster name, namespace) in a pod KubeRay made (it sets RAY_CLUSTER_NAME on every Ray container)."""
    name = os.environ.get("RAY_CLUSTER_NAME")
    try:
        namespace = (SERVICE_ACCOUNT / "namespace").read_text().strip()
    except OSError:
        return None
    return (name, namespace) if name and os.environ.get("KUBERNETES_SERVICE_HOST") else None


def kuberay_config() -> dict[str, Any] | None:
    """The RayCluster's node types as KubeRay's autoscaler reads them; None outside KubeRay or when the pod's
    service account may not read it (KubeRay's in-tree autoscaling gives the head's the right)."""
    cluster = kuberay_cluster()
    if cluster is None:
        return None
    from ray.autoscaler._private.kuberay.node_provider import KubernetesHttpApiClient

    try:
        return node_types_of_raycluster(KubernetesHttpApiClient(namespace=cluster[1]).get(f"rayclusters/{cluster[0]}"))
    except Exception:  # noqa: BLE001 - no API server, no permission: the next source, or none
        return None


def node_types_of_raycluster(raycluster: dict[str, Any]) -> dict[str, Any]:
    """A RayCluster (the custom resource) as the autoscaler config KubeRay's autoscaler derives from it."""
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    return _derive_autoscaling_config_from_ray_cr(raycluster)
