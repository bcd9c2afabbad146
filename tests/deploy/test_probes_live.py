"""The probes, run: a local Ray head and worker started with the environment KubeRay 1.7 gives the manifests' Ray
containers (token authentication on: RAY_AUTH_MODE=token, RAY_AUTH_TOKEN from the secret; the dashboard agent on a
port of its own), and on them the exact probe commands of deploy/kuberay/base/raycluster.yaml, KubeRay 1.4's default
commands in the environment the image has, and KubeRay 1.7's default HTTP check (a GET of the agent's /api/healthz,
as the kubelet runs it). They pass on a live node and fail once it is stopped.

Two nodes share this machine, so each agent listens on a free port, not on the manifests' 52365, and the dashboard
on the cluster's free port, not on 8265: in each command only those port numbers are swapped (`with_ports`). The
image's venv Python is this checkout's venv Python."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from tests.cluster.ray_cluster import RayCluster, client_token_auth
from tests.deploy.kuberay_auth import SECRET_KEY, operator_containers, token_secret
from tests.deploy.kuberay_manifests import container, documents, groups
from tests.deploy.kuberay_probes import (
    AGENT_PORT,
    DASHBOARD_PORT,
    DEFAULT_COMMANDS,
    DEFAULT_TIMINGS,
    PROBES,
    http_probe_passes,
    kuberay_1_7_default,
    with_ports,
)
from tests.deploy.kustomize_overlays import rendered
from tests.deploy.pod_env import IMAGE_VENV_PYTHON, base_env, container_env, process_token
from tests.tuning.mlflow_server import free_port

pytestmark = pytest.mark.faults
# A node's agent answers some seconds after Ray counts the node alive (KubeRay waits 10 + 10 x 5 s); generous, as
# this machine's cores are shared and Ray is slow to start when they are busy.
READY_WITHIN_S = 300


@pytest.fixture(scope="module")
def manifest() -> dict:
    return documents("base/raycluster.yaml")["RayCluster"]


@pytest.fixture(scope="module")
def nodes(manifest, tmp_path_factory):
    """A head with the environment KubeRay 1.7 gives the head container (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN from the
    secret; its envFrom: the local overlay's settings, no optional secret made) and a worker "worker", each agent on
    its own port -> (cluster, {node: agent port}, the head's env)."""
    token = secrets.token_hex(32)  # a token of this test's own: not the ~/.ray/auth_token other clusters here use
    store = {token_secret(manifest): {SECRET_KEY: token}}
    settings = {"mamba-tune-settings": rendered("local")["ConfigMap", "mamba-tune-settings"]["data"]}
    own = container_env(operator_containers(manifest)["head"], settings, store)
    env = {**base_env(tmp_path_factory.mktemp("home")), **own}
    cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"))
    cluster.env.update(own)
    agents = {"head": free_port(), "worker": free_port()}
    with client_token_auth(), process_token(token):
        try:
            cluster.start_head(cpus=0, args=[f"--dashboard-agent-listen-port={agents['head']}"],
                               timeout_s=READY_WITHIN_S)
            cluster.add_node("worker", cpus=1, args=[f"--dashboard-agent-listen-port={agents['worker']}"],
                             timeout_s=READY_WITHIN_S)
            yield cluster, agents, env
        finally:
            cluster.stop()


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def probes(manifest: dict, node: str, ports: dict[int, int], host: str, env: dict[str, str]) -> dict[str, Callable]:
    """The node's checks, each run once -> (passed, what it said): the manifest's probe commands, KubeRay 1.4's
    default command and KubeRay 1.7's default HTTP check, on this machine's ports."""
    spec = container(manifest["spec"]["headGroupSpec"] if node == "head" else groups(manifest)["cpu"])
    checks = {}
    for probe in PROBES:
        command = [sys.executable if word == IMAGE_VENV_PYTHON else with_ports(word, ports)
                   for word in spec[probe]["exec"]["command"]]
        assert command != spec[probe]["exec"]["command"], "the image's venv Python and the ports were swapped"
        checks[f"manifest {probe}"] = command
    checks["KubeRay 1.4 default"] = ["bash", "-c", with_ports(DEFAULT_COMMANDS[node], ports)]
    found = {name: (lambda command=command: _ran(run(command, env))) for name, command in checks.items()}
    http = kuberay_1_7_default(manifest["spec"]["rayVersion"], node)["httpGet"]
    timeout = DEFAULT_TIMINGS[node, "readinessProbe"]["timeoutSeconds"]
    found["KubeRay 1.7 default"] = lambda: (http_probe_passes(host, ports[http["port"]], http["path"], timeout), http)
    return found


def _ran(done: subprocess.CompletedProcess) -> tuple[bool, str]:
    return done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]


def passes_within(check: Callable, seconds: float) -> tuple[bool, str]:
    """Run the check every 2 s, as readiness does, until it passes or `seconds` are over -> its last result."""
    deadline = time.monotonic() + seconds
    while not (result := check())[0] and time.monotonic() < deadline:
        time.sleep(2)
    return result


def test_probes_pass_on_a_live_node_and_fail_on_a_stopped_one(nodes, manifest):
    cluster, agents, env = nodes
    # token authentication is on: the Jobs API refuses a caller without the token, yet the probes' paths answer
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{cluster.dashboard}/api/jobs/", timeout=30)
    assert refused.value.code == 401
    host = cluster.address.rpartition(":")[0]  # the node's address, where the kubelet's HTTP GET goes
    checks = {node: probes(manifest, node, {AGENT_PORT: agents[node], DASHBOARD_PORT: cluster.dashboard_port},
                           host, env)
              for node in ("head", "worker")}
    for node, named in checks.items():
        for name, check in named.items():
            passed, said = passes_within(check, READY_WITHIN_S)
            assert passed, (node, name, said)

    cluster.kill_node("worker")  # the worker's probes fail; the head's, another node's, still pass
    for name, check in checks["worker"].items():
        assert not check()[0], ("worker", name)
    for name, check in checks["head"].items():
        assert passes_within(check, READY_WITHIN_S)[0], ("head", name)

    cluster.kill_node("head")
    for name, check in checks["head"].items():
        assert not check()[0], ("head", name)
