"""The node types read from a running autoscaler: a real Ray head whose autoscaler (v2, Ray's own monitor process)
runs Ray's fake multi-node provider, with a GPU group that stands at zero. The sweep plans GPU trials for it before
any GPU node is up, and refuses `gpus_per_trial: auto` on a cluster that has no GPU and can launch none.

The cluster is started as tests/cluster/ray_cluster.py starts every test cluster (its own port, temp folder and
process tree), not with ray.cluster_utils.AutoscalingCluster: that runs `ray stop --force`, which stops every Ray
on the machine, and Ray 2.60's wheel lacks the fake provider's defaults file it reads (fake_multi_node/example.yaml),
so the provider is named as an external module, which needs none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray
import ray._private.state

from tests.bars import write_bars
from tests.cli import assert_one_line_error, run_cli
from tests.cluster.ray_cluster import RayCluster, client_token_auth
from tests.tuning.sweeps import space_values, write_space
from tuning.cluster.autoscaler import autoscaler_node_types, launchable_nodes
from tuning.search.space import parse_space
from tuning.sweep import session

FAKE_HEAD_NODE_ID = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"  # the fake provider's head
GPU_NODE = {"CPU": 1, "GPU": 1}


def autoscaler_config(gcs_address: str, workers: dict) -> dict:
    """An autoscaler config for Ray's fake multi-node provider (its example.yaml, as AutoscalingCluster fills it for
    autoscaler v2): a head of 1 CPU, `workers` the worker node types."""
    provider = {"type": "external", "module": "ray.autoscaler._private.fake_multi_node.node_provider."
                "FakeMultiNodeProvider", "use_node_id_as_ip": True, "disable_node_updaters": True,
                "disable_launch_config_check": True, "launch_multiple": True, "head_node_id": FAKE_HEAD_NODE_ID,
                "gcs_address": gcs_address}
    head = {"ray.head.default": {"resources": {"CPU": 1}, "node_config": {}, "max_workers": 0}}
    return {"cluster_name": "fake_multinode", "max_workers": 2, "provider": provider, "head_node_type":
            "ray.head.default", "available_node_types": {**head, **workers}, "auth": {}, "upscaling_speed": 1.0,
            "idle_timeout_minutes": 0.1, "docker": {}, "initialization_commands": [], "setup_commands": [],
            "head_setup_commands": [], "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": [], "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": []}


GPU_GROUP = {"gpu": {"resources": GPU_NODE, "min_workers": 0, "max_workers": 2, "node_config": {}}}


@pytest.fixture(scope="module")
def autoscaling(tmp_path_factory):
    """(the cluster, its autoscaler's config file): a head of 1 CPU and the GPU group at zero; the sweep's driver
    (this process) joined to it, as on the head node."""
    folder = tmp_path_factory.mktemp("autoscaling")
    cluster = RayCluster(folder)
    config = folder / "autoscaling.json"  # not ~/ray_bootstrap_config.yaml: the sweep must ask the autoscaler
    config.write_text(json.dumps(autoscaler_config(cluster.address, GPU_GROUP)))
    cluster.env.update({"RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1", "RAY_enable_autoscaler_v2": "1",
                        "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID, "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID})
    with client_token_auth():
        try:
            cluster.start_head(cpus=1, autoscaling_config=config)
            ray.init(address=cluster.address, log_to_driver=False)
            yield cluster, config
        finally:
            ray.shutdown()
            cluster.stop()


def test_launchable_nodes_are_read_from_the_running_autoscaler(autoscaling, tmp_path):
    _, config = autoscaling
    assert ray._private.state.state.get_cluster_config() is None  # Ray 2.60's autoscaler reports none to the GCS
    found = autoscaler_node_types(tmp_path / "no-bootstrap-file.yaml")
    assert found is not None and found.source == f"the running autoscaler's {config}"
    assert launchable_nodes(tmp_path / "no-bootstrap-file.yaml") == [GPU_NODE] * 2  # the group's max_workers
    monitors = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if f"={config}".encode() in
                p.read_bytes()]  # the config is the v2 autoscaler's: its monitor runs with it
    assert any(b"ray/autoscaler/v2/monitor.py" in m for m in monitors)  # (`ray start --head` has it too)


def test_a_sweep_plans_gpu_trials_before_any_gpu_node_is_up(autoscaling):
    alive = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    assert len(alive) == 1 and "GPU" not in alive[0]  # only the head: the GPU group stands at zero
    views = session.cluster_views()
    assert views[0] == alive and sum(node.get("GPU", 0) for node in views[1]) == 2
    space = parse_space(space_values(resources={"workers": 1, "cpus_per_worker": 1, "gpus_per_trial": 1}), "s.yaml")
    plan = session.cluster_plan(space)
    assert (plan.gpus_per_worker, plan.concurrency) == (1.0, 2)  # one trial a GPU node, both nodes to come


def test_gpus_auto_on_a_cluster_that_can_launch_no_gpu_is_refused_in_one_line(autoscaling, tmp_path):
    cluster, config = autoscaling
    cpu_only = {"cpu": {"resources": {"CPU": 2}, "min_workers": 0, "max_workers": 2, "node_config": {}}}
    before = config.read_text()
    config.write_text(json.dumps(autoscaler_config(cluster.address, cpu_only)))  # the autoscaler's types, changed
    try:
        bars = write_bars(tmp_path / "bars.parquet", 1500, seed=3)
        space = write_space(tmp_path, resources={"gpus_per_trial": "auto"})
        done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps",
                       "--address", cluster.address, timeout=300)
    finally:
        config.write_text(before)
    assert_one_line_error(done, "resources: gpus_per_trial auto, and no node of this cluster has a GPU")
    assert "set resources.gpus_per_trial: 0" in done.stderr and "give the autoscaler a GPU node group" in done.stderr
    assert not (tmp_path / "sweeps" / "t" / "sweep.json").exists()  # refused before anything is written
