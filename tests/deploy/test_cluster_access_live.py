"""Ray's token authentication as KubeRay 1.7 sets it up from the RayCluster's `authOptions`, on a live local head
started with the environment the operator gives the head container (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN from the
secret mamba-tune-ray-token): the Jobs API refuses a job submitted without the token or with another; KubeRay 1.7's
submitter command, run with its default submitter's environment, submits and follows one; the operator's own calls
(a RayJob's status, its stop) pass with the header it sends and not without; the workers' init container and the
autoscaler reach the GCS with their environment; the head's preStop hook stops the running jobs."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest
import yaml
from ray.job_submission import JobStatus, JobSubmissionClient

from tests.cli import free_port
from tests.cluster.ray_cluster import RAY, RayCluster, client_token_auth, kill_holding_files_in
from tests.deploy.kuberay_auth import SECRET_KEY, operator_containers, operator_headers, token_secret
from tests.deploy.kuberay_manifests import container, documents, groups
from tests.deploy.kuberay_submitter import submitter_command, wait_gcs_ready_check
from tests.deploy.kustomize_overlays import rendered
from tests.deploy.pod_env import IMAGE_VENV_PYTHON, TOKEN, base_env, container_env, process_token, secret_refs

pytestmark = pytest.mark.faults
SECRET = "mamba-tune-ray-token"
ENTRYPOINT_SAYS = "ran-with-the-token"
READY_WITHIN_S = 300  # generous: this machine's cores are shared, and Ray's start is slow when they are busy
# The site's optional secrets the head takes whole through envFrom (the database's password, the tracking server's
# login); mamba-tune-aws is left unmade, as on a cloud whose service-account role reaches S3
SITE_SECRETS = {"mamba-tune-db": {"PGPASSWORD": "db-password"},
                "mamba-tune-mlflow": {"MLFLOW_TRACKING_USERNAME": "sweeps",
                                      "MLFLOW_TRACKING_PASSWORD": "mlflow-password"}}
# The pod's fields the autoscaler's env names (fieldRef), as the kubelet fills them in
POD_FIELDS = {"metadata.namespace": "mamba-tune", "metadata.name": "mamba-tune-head-7xk2p",
              "metadata.labels['ray.io/cluster']": "mamba-tune"}


@pytest.fixture(scope="module")
def manifests() -> tuple[dict, dict]:
    return documents("base/raycluster.yaml")["RayCluster"], documents("rayjob.yaml")["RayJob"]


@pytest.fixture(scope="module")
def settings() -> dict[str, dict[str, str]]:
    """The ConfigMaps as the local overlay makes them: mamba-tune-settings, which each Ray container's envFrom reads."""
    return {"mamba-tune-settings": rendered("local")["ConfigMap", "mamba-tune-settings"]["data"]}


@pytest.fixture(scope="module")
def head(manifests, settings, tmp_path_factory):
    """A head with the environment the operator gives the head container, its envFrom's too (the local overlay's
    settings, the optional secrets that are made) -> (cluster, the secrets as Kubernetes would hold them, an empty
    home for the clients: no ~/.ray/auth_token there, the token)."""
    token = secrets.token_hex(32)
    store = {token_secret(manifests[0]): {SECRET_KEY: token}, **SITE_SECRETS}
    spec = operator_containers(manifests[0])["head"]
    assert secret_refs(spec) == {TOKEN: (SECRET, SECRET_KEY)}
    home = tmp_path_factory.mktemp("home")
    cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"))
    cluster.env.update(container_env(spec, settings, store))  # the container's own: on the base this machine gives
    with client_token_auth(), process_token(token):
        try:
            cluster.start_head(cpus=1, timeout_s=READY_WITHIN_S)
            wait_for(cluster, cluster.submit("true", timeout_s=READY_WITHIN_S), JobStatus.SUCCEEDED)
            yield cluster, store, home, token
        finally:
            cluster.stop()


def wait_for(cluster: RayCluster, job: str, status: JobStatus) -> None:
    """Until the job has `status`. The fixture's first job waits out the head's agent, as KubeRay waits for the head's
    readiness before it creates the submitter: a head that has only just started answers "No available agent"."""
    client, deadline = JobSubmissionClient(cluster.dashboard), time.monotonic() + READY_WITHIN_S
    while (now := client.get_job_status(job)) != status:
        assert time.monotonic() < deadline and not now.is_terminal(), (job, now, client.get_job_logs(job)[-2000:])
        time.sleep(1)


def run(command: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def operator_call(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, dict]:
    """A Jobs API call as KubeRay's dashboard client makes it -> (HTTP status, its JSON)."""
    request = urllib.request.Request(url, method=method, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, {}


def test_a_job_on_the_head_has_what_its_envfrom_gives(head, settings):
    """The settings and the optional secrets that exist reach the head's processes, a sweep's driver among them."""
    cluster = head[0]
    names = ["MAMBA_TUNE_STORAGE", "MLFLOW_TRACKING_URI", "PGPASSWORD", "MLFLOW_TRACKING_USERNAME"]
    job = cluster.submit(f"printenv {' '.join(names)}", timeout_s=READY_WITHIN_S)
    wait_for(cluster, job, JobStatus.SUCCEEDED)
    logs = JobSubmissionClient(cluster.dashboard).get_job_logs(job)  # Ray's own lines around printenv's
    given = {**settings["mamba-tune-settings"], **SITE_SECRETS["mamba-tune-db"], **SITE_SECRETS["mamba-tune-mlflow"]}
    assert "\n" + "\n".join(given[name] for name in names) + "\n" in logs, logs


def test_jobs_api_refuses_a_job_without_the_token_and_the_submitter_sends_it(head, manifests):
    cluster, store, home, _ = head
    laptop = base_env(home)  # no RAY_AUTH_MODE, no token anywhere
    submit = [RAY, "job", "submit", "--address", cluster.dashboard, "--no-wait", "--", "echo", "never"]
    refused = run(submit, laptop)
    assert refused.returncode != 0 and "Authentication required" in refused.stdout + refused.stderr, refused
    another = run(submit, {**laptop, "RAY_AUTH_MODE": "token", TOKEN: secrets.token_hex(32)})
    assert another.returncode != 0 and "Authentication failed" in another.stdout + another.stderr, another

    runtime_env = yaml.safe_load(manifests[1]["spec"]["runtimeEnvYAML"])
    command = submitter_command(cluster.dashboard, "rayjob-without-token", f"echo {ENTRYPOINT_SAYS}", runtime_env)
    assert run(command, laptop).returncode != 0  # a submitter without the operator's token: refused
    job_id = "rayjob-with-token"
    submitter = operator_containers(*manifests, dashboard=cluster.dashboard, job_id=job_id)["submitter"]
    command = submitter_command(cluster.dashboard, job_id, f"echo {ENTRYPOINT_SAYS}", runtime_env)
    done = run(command, {**base_env(home), **container_env(submitter, secrets=store)})
    assert done.returncode == 0 and ENTRYPOINT_SAYS in done.stdout, done
    assert JobSubmissionClient(cluster.dashboard).get_job_status(job_id) == JobStatus.SUCCEEDED


def test_operator_follows_and_stops_a_rayjobs_job_with_the_token(head):
    """KubeRay 1.7's GetJobInfo (a RayJob's status) and StopJob (a RayJob deleted) with the header it sends; without
    it, as KubeRay 1.4 called, both are refused: the RayJob never left Running, and deleting it stopped nothing."""
    cluster, _, _, token = head
    job = cluster.submit("sleep 600", timeout_s=READY_WITHIN_S)
    wait_for(cluster, job, JobStatus.RUNNING)
    info, stop = f"{cluster.dashboard}/api/jobs/{job}", f"{cluster.dashboard}/api/jobs/{job}/stop"
    assert operator_call(info, {})[0] == 401 and operator_call(stop, {}, "POST")[0] == 401
    status, answer = operator_call(info, operator_headers(token))
    assert status == 200 and answer["status"] == "RUNNING", answer
    status, answer = operator_call(stop, operator_headers(token), "POST")
    assert status == 200 and answer["stopped"] is True, answer
    wait_for(cluster, job, JobStatus.STOPPED)


def test_init_containers_and_autoscaler_reach_the_gcs_with_their_env(head, manifests):
    cluster, store, home, _ = head
    check = wait_gcs_ready_check(cluster.address)
    given = operator_containers(manifests[0])
    for group in groups(manifests[0]):  # KubeRay copies the worker's env into wait-gcs-ready, then adds the token
        env = {**base_env(home), **container_env(given[f"{group} wait-gcs-ready"], secrets=store)}
        done = run(check, env)
        assert done.returncode == 0, (group, done.stderr[-2000:])
    without_token = {name: value for name, value in env.items() if name != TOKEN}
    assert run(check, without_token).returncode != 0
    autoscaler = {**base_env(home), **container_env(given["autoscaler"], secrets=store, fields=POD_FIELDS)}
    done = run([RAY, "status", "--address", cluster.address], autoscaler)  # the GCS, as the autoscaler reads it
    assert done.returncode == 0, done.stderr[-2000:]


def test_heads_prestop_hook_stops_running_jobs_with_auth_on(head, manifests, settings):
    cluster, store, home, _ = head
    spec = operator_containers(manifests[0])["head"]
    assert spec["lifecycle"] == container(manifests[0]["spec"]["headGroupSpec"])["lifecycle"]
    hook = [sys.executable if word == IMAGE_VENV_PYTHON else word.replace(":8265", f":{cluster.dashboard_port}")
            for word in spec["lifecycle"]["preStop"]["exec"]["command"]]
    job = cluster.submit("sleep 600", timeout_s=READY_WITHIN_S)
    wait_for(cluster, job, JobStatus.RUNNING)
    client = JobSubmissionClient(cluster.dashboard)
    env = {**base_env(home), **container_env(spec, settings, store)}
    assert run(hook, {name: value for name, value in env.items() if name != TOKEN}).returncode != 0
    assert client.get_job_status(job) == JobStatus.RUNNING  # without the token the hook reached nothing
    done = run(hook, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert client.get_job_status(job) == JobStatus.STOPPED


def test_a_ray_container_without_the_operators_token_does_not_start(manifests, settings, tmp_path):
    """authOptions pruned (an operator older than 1.6, a CRD left old): the head container has only the env the
    manifest writes, RAY_AUTH_MODE=token and no token, and its `ray start` refuses to run rather than run open."""
    pruned = {**manifests[0], "spec": {k: v for k, v in manifests[0]["spec"].items() if k != "authOptions"}}
    spec = operator_containers(pruned)["head"]
    env = {**base_env(tmp_path), **container_env(spec, settings)}  # an empty home: no ~/.ray/auth_token either
    assert env.get("RAY_AUTH_MODE") == "token" and TOKEN not in env
    temp_dir = tempfile.mkdtemp(prefix="mt-ray-", dir="/tmp")  # short, as RayCluster's: Ray's socket paths must fit
    start = [RAY, "start", "--head", "--port", str(free_port()), "--num-cpus", "0", "--include-dashboard", "false",
             "--temp-dir", temp_dir]
    try:
        done = run(start, env)
        assert done.returncode != 0 and "no authentication token was found" in done.stdout + done.stderr, done
    finally:  # started after all, or in part: stop what this test started (what holds its temp folder), and only it
        kill_holding_files_in(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
