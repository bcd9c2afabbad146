"""deploy/kuberay/base/mlflow.yaml, the tracking server as a Deployment and a Service: fields Kubernetes keeps, a
Service that finds the pods, probes on /health, the database's password from a secret, and `--allowed-hosts` that
names the Service (MLflow 3 refuses any other Host header than localhost's and private IPs' otherwise: every pod
calling http://mlflow:5000 got 403).

The faults tier starts `mlflow server` with the manifest's own command line, built as the kubelet builds it (env from
stand-ins for the ConfigMap, the Secret and the pod's namespace, then `$(VAR)` expanded), and talks to it as a pod
does. Swapped, and only these: the stores the overlay's settings name, for a throwaway PostgreSQL on loopback
(reached with the password from the stand-in secret, as the pod reaches its database) and a folder under tmp_path
for the bucket; and the listening port, 5000, for a free one, since tests run side by side. The client still names
http://mlflow:5000, as the pods' MLFLOW_TRACKING_URI does: for this test process alone the name resolves to loopback
and the server's port, as the Service maps its port 5000 to the pod's, so every request carries `Host: mlflow:5000`.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from mlflow.server.security_utils import INVALID_HOST_MSG, is_allowed_host_header

from tests.cli import free_port
from tests.deploy.kuberay_fields import model_unknown_fields
from tests.deploy.kustomize_overlays import OVERLAYS, rendered
from tests.deploy.pod_env import command_line, container_env
from tests.postgres_server import PostgresServer
from tests.processes import serving, wait_until_healthy

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kuberay" / "base" / "mlflow.yaml"
SETTINGS_KEYS = {"MLFLOW_BACKEND_STORE_URI", "MLFLOW_ARTIFACTS_DESTINATION"}  # what the server reads of the settings
NAMESPACE = "team-ns"  # the pod's metadata.namespace, which the overlay sets
KUBELET_HOST = "10.244.1.7:5000"  # a kubelet's httpGet probe goes to the pod's IP: Host is that IP and the port
# Keys, passwords and tokens as they would be written (the same as test_kuberay_manifests.py's)
KEY_LIKE = re.compile(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|password:|token:|-----BEGIN [A-Z ]*PRIVATE KEY", re.I)
USER_AND_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")  # scheme://user:password@host
FOREIGN_HOSTS = ["evil.example:5000", "mlflow.evil.example:5000", KUBELET_HOST]  # the last: a pod's IP, not a name


def documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc}


@pytest.fixture(scope="module")
def deployment() -> dict:
    return documents()["Deployment"]


@pytest.fixture(scope="module")
def service() -> dict:
    return documents()["Service"]


def server_container(deployment: dict) -> dict:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def service_names(service: dict, namespace: str) -> list[str]:
    """Each name a pod reaches the Service by, with its port: the Host header it sends."""
    name, port = service["metadata"]["name"], service["spec"]["ports"][0]["port"]
    return [f"{name}{suffix}:{port}" for suffix in ("", f".{namespace}", f".{namespace}.svc",
                                                    f".{namespace}.svc.cluster.local")]


def started_as(deployment: dict, settings: dict[str, str], password: str) -> tuple[list[str], dict[str, str]]:
    """The server's command line and environment in a pod, given the settings and the secret's password."""
    container = server_container(deployment)
    env = container_env(container, {"mamba-tune-settings": settings}, {"mamba-tune-db": {"PGPASSWORD": password}},
                        {"metadata.namespace": NAMESPACE})
    return command_line(container, env), env


def command_as_started(deployment: dict, settings: dict[str, str], password: str) -> list[str]:
    return started_as(deployment, settings, password)[0]


def option(command: list[str], name: str) -> str:
    (value,) = [word.partition("=")[2] for word in command if word.startswith(f"{name}=")]
    return value


def test_mlflow_manifest_uses_only_fields_kubernetes_has(deployment, service):
    assert (deployment["apiVersion"], service["apiVersion"]) == ("apps/v1", "v1")
    assert model_unknown_fields(deployment, "V1Deployment", "Deployment") == []
    assert model_unknown_fields(service, "V1Service", "Service") == []
    broken = {**service, "spec": {**service["spec"], "selectors": {}}}
    assert model_unknown_fields(broken, "V1Service", "Service") == ["Service.spec.selectors"]


def test_mlflow_service_selects_the_server_pods_on_its_port(deployment, service):
    pods = deployment["spec"]["template"]["metadata"]["labels"]
    assert pods["app.kubernetes.io/name"] == "mlflow"  # the NetworkPolicy's selector
    assert service["metadata"]["name"] == "mlflow"  # the settings' MLFLOW_TRACKING_URI, http://mlflow:5000
    for selector in (service["spec"]["selector"], deployment["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= pods.items()
    (port,) = service["spec"]["ports"]
    container_ports = {entry["name"]: entry["containerPort"] for entry in server_container(deployment)["ports"]}
    assert port["port"] == container_ports[port["targetPort"]] == 5000
    command = command_as_started(deployment, dict.fromkeys(SETTINGS_KEYS, "x"), "x")
    assert option(command, "--port") == "5000" and option(command, "--host") == "0.0.0.0"


def test_mlflow_probes_ask_health_on_the_servers_port(deployment):
    container = server_container(deployment)
    ports = {entry["name"]: entry["containerPort"] for entry in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
        assert ports[container[probe]["httpGet"]["port"]] == 5000, probe


def test_mlflow_stores_come_from_the_settings_and_the_password_from_a_secret(deployment):
    container = server_container(deployment)
    refs = {variable["name"]: variable.get("valueFrom", {}) for variable in container["env"]}
    assert refs["PGPASSWORD"] == {"secretKeyRef": {"name": "mamba-tune-db", "key": "PGPASSWORD", "optional": True}}
    assert {name for name, ref in refs.items() if ref.get("configMapKeyRef", {}).get("name") == "mamba-tune-settings"} \
        == SETTINGS_KEYS
    settings = {"MLFLOW_BACKEND_STORE_URI": "postgresql://mlflow@db.example:5432/mlflow",
                "MLFLOW_ARTIFACTS_DESTINATION": "s3://bucket/mlflow"}
    command = command_as_started(deployment, settings, "not-in-the-command")
    assert command[:2] == ["mlflow", "server"] and "--serve-artifacts" in command
    assert option(command, "--backend-store-uri") == settings["MLFLOW_BACKEND_STORE_URI"]
    assert option(command, "--artifacts-destination") == settings["MLFLOW_ARTIFACTS_DESTINATION"]
    assert not any("not-in-the-command" in word for word in command)
    with pytest.raises(KeyError, match="mamba-tune-settings/MLFLOW_ARTIFACTS_DESTINATION"):
        command_as_started(deployment, {"MLFLOW_BACKEND_STORE_URI": "sqlite:///x.db"}, "x")
    assert KEY_LIKE.search(MANIFEST.read_text()) is None
    assert USER_AND_PASSWORD.search(MANIFEST.read_text()) is None


def test_mlflow_allowed_hosts_name_the_service_and_nothing_wider(deployment, service):
    allowed = option(command_as_started(deployment, dict.fromkeys(SETTINGS_KEYS, "x"), "x"), "--allowed-hosts")
    hosts = allowed.split(",")
    assert set(service_names(service, NAMESPACE)) <= set(hosts)
    # MLflow's own matching (fnmatch on '*'): the Service's names and port-forward's localhost in, nothing else
    for admitted in [*service_names(service, NAMESPACE), "localhost:5000", "127.0.0.1:8080"]:
        assert is_allowed_host_header(hosts, admitted), admitted
    for refused in [*FOREIGN_HOSTS, "mlflow.other-ns:5000", "mlflow:5000.evil.example"]:
        assert not is_allowed_host_header(hosts, refused), refused


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_gives_the_tracking_server_its_settings(overlay):
    objects = rendered(overlay)
    settings = objects["ConfigMap", "mamba-tune-settings"]
    assert SETTINGS_KEYS <= settings["data"].keys()
    assert not any(USER_AND_PASSWORD.search(value) for value in settings["data"].values())
    server = objects["Deployment", "mlflow"]
    assert server["metadata"].get("namespace") == settings["metadata"].get("namespace")  # where the pod reads it
    assert "/" in server_container(server)["image"]  # the overlay's registry reached it (`images:`)


class TrackingServer:
    """The manifest's `mlflow server`, over a throwaway PostgreSQL and an artifact folder (the module docstring says
    what is swapped and why)."""

    def __init__(self, deployment: dict, folder: Path) -> None:
        self.folder, self.port, self.database = folder, free_port(), PostgresServer()
        self.artifacts = folder / "bucket" / "mlflow"
        self.process: subprocess.Popen | None = None
        self.deployment = deployment

    def start(self, timeout_s: float = 300) -> None:
        self.database.start()
        url = self.database.create_database("mlflow").replace("://", f"://{self.database.user}@")
        settings = {"MLFLOW_BACKEND_STORE_URI": url, "MLFLOW_ARTIFACTS_DESTINATION": str(self.artifacts)}
        command, env = started_as(self.deployment, settings, self.database.password)
        assert command.count("--port=5000") == 1
        command[command.index("--port=5000")] = f"--port={self.port}"
        # The image's environment: its venv first on PATH (where `mlflow` is), HOME; then the container's.
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": os.environ["HOME"],
               **env}
        with open(self.folder / "server.log", "w") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        wait_until_healthy(self.process, f"http://127.0.0.1:{self.port}/health", timeout_s, self.log)

    def log(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")[-3000:]

    def get(self, path: str, host: str) -> tuple[int, str]:
        """GET `path` with this Host header, as a client that named `host` sends it."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("GET", path, headers={"Host": host})
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def stop(self) -> None:
        """SIGTERM, as Kubernetes stops a pod (`mlflow server` passes it to uvicorn); SIGKILL if that hangs."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.database.stop()


@pytest.fixture(scope="module")
def tracking_server(deployment, tmp_path_factory):
    yield from serving(TrackingServer(deployment, tmp_path_factory.mktemp("mlflow-manifest")))


@pytest.fixture()
def service_dns(tracking_server, monkeypatch):
    """`mlflow` resolves, in this process only, to the server: port 5000 to its port, as the Service maps it. The
    client's requests are real HTTP, their Host header the one a pod sends. -> the lookups made."""
    lookups: list[tuple[str, int]] = []
    resolve = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "mlflow":
            lookups.append((host, int(port)))
            assert int(port) == 5000, "the client must use the Service's port"
            return resolve("127.0.0.1", tracking_server.port, *args, **kwargs)
        return resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")  # every Ray pod has it; only the driver uses it
    monkeypatch.setenv("NO_PROXY", "mlflow")  # straight to the server, as inside the cluster
    return lookups


@pytest.mark.faults
def test_a_pod_logs_a_run_with_an_artifact_through_the_service_name(tracking_server, service_dns, tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient()
    run = client.create_run(client.create_experiment("lr-wide"))
    client.log_metric(run.info.run_id, "val_loss", 0.25, step=3)
    (tmp_path / "model-card.txt").write_text("the winner of lr-wide\n")
    client.log_artifact(run.info.run_id, str(tmp_path / "model-card.txt"))
    client.set_terminated(run.info.run_id)

    read = client.get_run(run.info.run_id)
    assert read.info.status == "FINISHED"
    torch.testing.assert_close(read.data.metrics["val_loss"], 0.25)
    fetched = Path(client.download_artifacts(run.info.run_id, "model-card.txt", str(tmp_path)))
    assert fetched.read_text() == "the winner of lr-wide\n"
    # The upload went through the server into its artifacts destination (the bucket, in the cluster)
    (stored,) = tracking_server.artifacts.rglob("model-card.txt")
    assert stored.read_text() == "the winner of lr-wide\n"
    assert service_dns and set(service_dns) == {("mlflow", 5000)}, "the client did not name the Service"


@pytest.mark.faults
def test_the_server_admits_the_service_names_and_port_forward_and_refuses_a_foreign_host(tracking_server, service):
    api = "/api/2.0/mlflow/experiments/search?max_results=1"
    # kubectl port-forward passes the browser's own Host: 127.0.0.1 or localhost with the local port it listens on
    for host in [*service_names(service, NAMESPACE), "127.0.0.1:5000", "localhost:5000", "localhost:8080"]:
        assert tracking_server.get(api, host)[0] == 200, (host, tracking_server.log())
    assert tracking_server.get("/", "localhost:5000")[0] == 200  # the UI's page
    for host in FOREIGN_HOSTS:
        assert tracking_server.get(api, host) == (403, INVALID_HOST_MSG), host
        assert tracking_server.get("/", host) == (403, INVALID_HOST_MSG), host


@pytest.mark.faults
def test_health_answers_the_kubelets_probe_whatever_its_host(tracking_server):
    # /health is exempt from the Host check: the probes pass though the pod's IP is not an allowed host
    for host in [KUBELET_HOST, "localhost:5000", "evil.example:5000"]:
        assert tracking_server.get("/health", host) == (200, "OK"), host
