"""cluster.yaml: valid for `ray up` by Ray's own schema and validator, with no credentials, and planned for."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from tuning.cluster.autoscaler import autoscaled_nodes, launchable_nodes
from tuning.search.resources import fullest_plan
from tuning.search.space import ResourceConfig

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
KEY_LIKE = re.compile(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|aws_access_key_id|-----BEGIN [A-Z ]*PRIVATE KEY")


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


def test_cluster_yaml_is_valid_for_ray_up(config):
    jsonschema.validate(config, SCHEMA)  # the file as written: no key Ray does not know
    validate_config(prepare_config(copy.deepcopy(config)))  # what `ray up` checks after filling its defaults


def test_cluster_yaml_schema_check_catches_a_misspelt_key(config):
    broken = copy.deepcopy(config)
    broken["available_node_types"]["gpu-1x"]["max_worker"] = 4
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        jsonschema.validate(broken, SCHEMA)


def test_cluster_yaml_has_a_cpu_head_with_mlflow_and_gpu_workers_from_zero(config):
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"] == {"CPU": 0}  # no training worker on the head
    workers = {name: spec for name, spec in types.items() if name != config["head_node_type"]}
    assert {spec["resources"]["GPU"] for spec in workers.values()} == {1, 4}
    assert all(spec["min_workers"] == 0 for spec in workers.values())
    start = " ".join(config["head_start_ray_commands"])
    assert "mlflow server --host 127.0.0.1" in start and "--artifacts-destination s3://" in start
    assert "--dashboard-host=127.0.0.1" in start
    assert any("[cuda]" in command for command in config["worker_setup_commands"])


def test_cluster_yaml_holds_no_credentials_and_marks_what_to_fill_in():
    text = (ROOT / "cluster.yaml").read_text()
    assert not KEY_LIKE.search(text)
    to_fill = [line for line in text.splitlines() if "FILL" in line]
    assert all(any(key in line for line in to_fill) for key in ("region:", "ImageId:", "Arn:", "s3://"))


def test_a_sweep_on_the_cluster_plans_for_the_gpu_nodes_it_can_launch(config):
    launchable = autoscaled_nodes(config)
    assert len(launchable) == config["max_workers"]  # 8 one-GPU + 2 four-GPU nodes
    head_only = [{"CPU": 0.0, "node:__internal_head__": 1.0}]
    plan = fullest_plan(ResourceConfig(cpus_per_worker=2, gpus_per_trial=0.5), [head_only, head_only + launchable])
    assert plan.concurrency == 2 * (8 * 1 + 2 * 4)  # two trials per GPU, on every GPU it may launch


def test_launchable_nodes_reads_the_autoscaler_config_and_ignores_what_it_cannot_read(tmp_path):
    assert launchable_nodes(ROOT / "cluster.yaml") == [{"CPU": 4, "GPU": 1}] * 8 + [{"CPU": 48, "GPU": 4}] * 2
    (tmp_path / "garbage.yaml").write_text("max_workers: [")
    (tmp_path / "other.yaml").write_text("- a list")
    assert launchable_nodes(tmp_path / "missing.yaml") == launchable_nodes(tmp_path / "garbage.yaml") == []
    assert launchable_nodes(tmp_path / "other.yaml") == []
    defaults = {"available_node_types": {"head": {}, "gpu": {"resources": {"GPU": 1}}}, "head_node_type": "head"}
    assert autoscaled_nodes(defaults) == [{"GPU": 1}] * 2  # Ray's defaults: max_workers 2, a type's = the cluster's

