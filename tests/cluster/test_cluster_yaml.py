"""cluster.yaml: valid for `ray up` by Ray's own schema and validator, with no credentials, planned for, and with
a head whose start commands, run again by `ray up` on a live cluster, leave Ray and MLflow (and the sweep) running."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest
import ray.autoscaler
from ray.autoscaler._private.util import prepare_config, validate_config

from tests.cluster.conftest import worker_types
from tuning.cluster.autoscaler import autoscaled_nodes, launchable_nodes
from tuning.search.resources import fullest_plan
from tuning.search.space import ResourceConfig

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
START = re.compile(r"\bray start\b|\bmlflow server\b")
# cluster.yaml's head start commands before: `ray up` on a live cluster stopped Ray and MLflow, and the sweep with them
STOPPING_HEAD_START = [
    "~/venv/bin/ray stop",
    "ulimit -n 65536; RAY_AUTH_MODE=token ~/venv/bin/ray start --head --port=6379 --autoscaling-config=~/ray_bootstrap_config.yaml",
    "pkill -f 'mlflow server' || true; nohup ~/venv/bin/mlflow server --host 127.0.0.1 --port 5000 > ~/mlflow/server.log 2>&1 &",
]
KEY_LIKE = re.compile(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|aws_access_key_id|-----BEGIN [A-Z ]*PRIVATE KEY")


def test_cluster_yaml_is_valid_for_ray_up(config):
    jsonschema.validate(config, SCHEMA)  # the file as written: no key Ray does not know
    validate_config(prepare_config(copy.deepcopy(config)))  # what `ray up` checks after filling its defaults


def test_cluster_yaml_schema_check_catches_a_misspelt_key(config):
    broken = copy.deepcopy(config)
    broken["available_node_types"]["gpu-1x"]["max_worker"] = 4
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        jsonschema.validate(broken, SCHEMA)


def test_cluster_yaml_has_a_cpu_head_with_mlflow_and_gpu_workers_from_zero(config):
    head = config["available_node_types"][config["head_node_type"]]
    assert head["resources"] == {"CPU": 0}  # no training worker on the head
    assert {spec["resources"]["GPU"] for spec in worker_types(config).values()} == {1, 4}
    assert all(spec["min_workers"] == 0 for spec in worker_types(config).values())
    start = " ".join(config["head_start_ray_commands"])
    assert "mlflow server --host 127.0.0.1" in start and "--artifacts-destination s3://" in start
    assert "--dashboard-host=127.0.0.1" in start
    assert "bash ~/mamba-tune/cluster/cuda-wheels.sh install" in config["worker_setup_commands"]  # the kernels


def test_cluster_yaml_holds_no_credentials_and_marks_what_to_fill_in():
    text = (ROOT / "cluster.yaml").read_text()
    assert not KEY_LIKE.search(text)
    to_fill = [line for line in text.splitlines() if "FILL" in line]
    assert all(any(key in line for line in to_fill) for key in ("region:", "ImageId:", "Arn:", "s3://", "SecurityGroupIds:"))


def test_a_sweep_on_the_cluster_plans_for_the_gpu_nodes_it_can_launch(config):
    launchable = autoscaled_nodes(config)
    types = worker_types(config)
    assert len(launchable) == config["max_workers"] == sum(spec["max_workers"] for spec in types.values())
    head_only = [{"CPU": 0.0, "node:__internal_head__": 1.0}]
    plan = fullest_plan(ResourceConfig(cpus_per_worker=2, gpus_per_trial=0.5), [head_only, head_only + launchable])
    assert plan.concurrency == 2 * (8 * 1 + 2 * 4 + 8 * 1)  # two trials per GPU, on every GPU it may launch
    assert list(types)[-1] == "gpu-1x-spot"  # the optional spot capacity last: the plan reaches it last


def test_launchable_nodes_reads_the_autoscaler_config_and_ignores_what_it_cannot_read(tmp_path):
    one, four = {"CPU": 4, "GPU": 1}, {"CPU": 48, "GPU": 4}
    assert launchable_nodes(ROOT / "cluster.yaml") == [one] * 8 + [four] * 2 + [one] * 8  # on demand, then spot
    (tmp_path / "garbage.yaml").write_text("max_workers: [")
    (tmp_path / "other.yaml").write_text("- a list")
    assert launchable_nodes(tmp_path / "missing.yaml") == launchable_nodes(tmp_path / "garbage.yaml") == []
    assert launchable_nodes(tmp_path / "other.yaml") == []
    defaults = {"available_node_types": {"head": {}, "gpu": {"resources": {"GPU": 1}}}, "head_node_type": "head"}
    assert autoscaled_nodes(defaults) == [{"GPU": 1}] * 2  # Ray's defaults: max_workers 2, a type's = the cluster's


def unguarded_head_start(commands: list[str]) -> list[str]:
    """Head start commands that stop or kill what runs, or start Ray or MLflow without asking first whether it runs
    (the form `CHECK || (START)`, CHECK a `ray status` or a `pgrep`)."""
    problems = []
    for command in commands:
        check, guarded, _ = command.partition(" || (")
        if re.search(r"\bray stop\b|\bp?kill(all)?\b", command) or (START.search(command) and not (
                guarded and re.search(r"\bray status\b|\bpgrep\b", check) and not START.search(check))):
            problems.append(command)
    return problems


def test_ray_up_on_a_live_cluster_leaves_ray_and_mlflow_running(config):
    assert unguarded_head_start(config["head_start_ray_commands"]) == []
    assert unguarded_head_start(STOPPING_HEAD_START) == STOPPING_HEAD_START
    assert unguarded_head_start([c.replace("|| (", "; (") for c in config["head_start_ray_commands"]])


def run_head_start(commands: list[str], home: Path, ray_runs: bool, mlflow_runs: bool) -> list[str]:
    """The commands in bash as `ray up` runs them on the head, with a fake ray and mlflow (each logs how it was
    called; `ray status` answers as told) and, when told, a process named mlflow already running. pgrep sees this
    session's processes only: an MLflow server elsewhere on this machine is none of its business."""
    calls, fakes = home / "calls", home / "fakes"
    for folder in (home / "venv" / "bin", home / "mlflow", fakes):
        folder.mkdir(parents=True, exist_ok=True)
    calls.write_text("")
    scripts = {home / "venv" / "bin" / "ray": f'echo "ray $*" >> {calls}; [ "$1" != status ] || exit {0 if ray_runs else 1}',
               home / "venv" / "bin" / "mlflow": f'echo "mlflow $*" >> {calls}',
               fakes / "pgrep": f'exec {shutil.which("pgrep")} -s 0 "$@"'}
    for path, body in scripts.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    running = fakes / "running"
    running.mkdir(exist_ok=True)
    if not (running / "mlflow").exists():
        (running / "mlflow").symlink_to(shutil.which("sleep"))  # a process named mlflow, as a server is
    server = f"{running}/mlflow 30 & server=$!\nuntil pgrep -x mlflow; do sleep 0.01; done\n" if mlflow_runs else ""
    script = f"{server}{chr(10).join(commands)}\n" + ("kill $server\n" if mlflow_runs else "")
    env = {**os.environ, "HOME": str(home), "PATH": f"{fakes}:{os.environ['PATH']}"}
    shell = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shell.wait(timeout=60)
        deadline = time.monotonic() + 5  # the server starts in the background: give it the time to say so
        while not mlflow_runs and "mlflow server" not in calls.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)  # its session: whatever it left running
    return [line.split(" --")[0] for line in calls.read_text().splitlines()]


def test_the_head_starts_ray_and_mlflow_only_where_none_runs(config, tmp_path):
    commands = config["head_start_ray_commands"]
    assert run_head_start(commands, tmp_path, ray_runs=True, mlflow_runs=True) == ["ray status"]
    assert run_head_start(commands, tmp_path, ray_runs=False, mlflow_runs=False) == [
        "ray status", "ray start", "mlflow server"]
    assert run_head_start(commands, tmp_path, ray_runs=True, mlflow_runs=False) == ["ray status", "mlflow server"]
    # what the old commands did to a live cluster (and their pkill -f killed its own shell, whose command line
    # names 'mlflow server' too, before it could start one)
    assert run_head_start(STOPPING_HEAD_START, tmp_path, ray_runs=True, mlflow_runs=True) == ["ray stop", "ray start"]


def test_the_heads_ray_gives_a_stopped_sweep_the_time_its_end_takes(config):
    # `ray job stop`: SIGTERM, which the sweep handles as Ctrl-C, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S
    # seconds (Ray's default: 3); every job's supervisor runs on the head and has its Ray's environment.
    from tuning.sweep.looks_kept import LOOK_SENT_S
    from tuning.tracking.runs import CLOSE_TIMEOUT_S

    start = " ".join(config["head_start_ray_commands"])
    wait = re.search(r"\bRAY_JOB_STOP_WAIT_TIME_S=(\d+) (?:\S+=\S+ )*\S*ray start --head\b", start)
    assert wait and int(wait.group(1)) > LOOK_SENT_S + CLOSE_TIMEOUT_S, start
