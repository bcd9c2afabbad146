"""A multi-node Ray cluster on one machine: a head and worker nodes, each its own `ray start --block` process.

A node is its `ray start` process and every process below it (raylet, agents, workers, job
drivers: Ray puts some in sessions of their own, and its process titles hide their command
lines, so the process tree is what names them). A test can kill one node with SIGKILL, as a
lost machine would; the cluster's cleanup kills every node and any orphan still holding a file
in the cluster's temp folder, even when a test fails. A node may be started in its own mount namespace with a folder hidden under
an empty tmpfs: what the others write there, it does not see (a node-local disk).

Token authentication is on (RAY_AUTH_MODE=token), as cluster.yaml has it: every node and every
client here use the token in ~/.ray/auth_token (made if missing); `client_token_auth` turns it
on in the test process too, so Ray's clients (state API, Jobs SDK) send it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.processes import process_tree
from tests.tuning.mlflow_server import free_port

if TYPE_CHECKING:
    from ray.job_submission import JobStatus

RAY = str(Path(sys.executable).with_name("ray"))
AUTH_MODE = "RAY_AUTH_MODE"


def _holding_files_in(folder: str) -> list[int]:
    """Processes with a file open under `folder` (Ray's processes keep their logs open)."""
    found = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd).startswith(folder) for fd in fd_dir.iterdir()):
                found.append(int(fd_dir.parent.name))
        except (OSError, ValueError):  # gone already, or not ours to read
            pass
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def kill_holding_files_in(folder: str) -> None:
    """SIGKILL every process with a file open under `folder`: a Ray started with --temp-dir=folder, and only it."""
    _kill(_holding_files_in(folder))


@contextmanager
def environment_variable(name: str, value: str, reload: Callable[[], object]) -> Iterator[None]:
    """`name`=`value` in this process while the context lasts, `reload` called after each change (Ray caches what it
    read of the environment)."""
    saved = os.environ.get(name)
    os.environ[name] = value
    reload()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
        reload()


@contextmanager
def client_token_auth() -> Iterator[None]:
    """RAY_AUTH_MODE=token in this process while the cluster lives (Ray caches it: its config is reloaded)."""
    from ray._raylet import Config

    with environment_variable(AUTH_MODE, "token", lambda: Config.initialize("")):
        yield


@contextmanager
def running(cluster: RayCluster, head_cpus: int, worker: str, worker_cpus: int,
            resources: dict[str, float] | None = None, timeout_s: float = 120) -> Iterator[RayCluster]:
    """The cluster's head and one worker node `worker` started, token authentication on in this process too; every
    process of the cluster killed at the end, even when a start or the test fails."""
    with client_token_auth():
        try:
            cluster.start_head(cpus=head_cpus, timeout_s=timeout_s)
            cluster.add_node(worker, cpus=worker_cpus, resources=resources, timeout_s=timeout_s)
            yield cluster
        finally:
            cluster.stop()


def wait_for_job(dashboard: str, job: str, deadline_s: float) -> tuple[JobStatus, str]:
    """Until the Ray job has ended, or fail at `deadline_s` (time.monotonic()) -> (its status, its logs)."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(dashboard)
    while not (status := client.get_job_status(job)).is_terminal():
        assert time.monotonic() < deadline_s, f"job {job} still {status}: {client.get_job_logs(job)[-3000:]}"
        time.sleep(2)
    return status, client.get_job_logs(job)


class RayCluster:
    def __init__(self, log_dir: Path, cwd: Path | None = None, ray: str = RAY) -> None:
        self.log_dir = log_dir
        self.cwd = cwd  # where each `ray start` runs, and so a job's entrypoint (None: this process's folder)
        self.ray = ray  # the `ray` program the nodes start with: another venv's runs its nodes in that venv
        self.temp_dir = tempfile.mkdtemp(prefix="mt-ray-", dir="/tmp")  # short: Ray's socket paths must fit
        self.port, self.dashboard_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"
        self.nodes: dict[str, subprocess.Popen] = {}
        self.node_ids: dict[str, str] = {}  # node name -> Ray's node id
        self.jobs: list[str] = []  # submitted through `submit`: stopped before the nodes are killed
        self.env = {**os.environ, AUTH_MODE: "token", "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_TRAIN_ENABLE_STATE_TRACKING": "1"}  # the dashboard's Train runs: which node ran which attempt

    def start_head(self, cpus: int, timeout_s: float = 120, autoscaling_config: Path | None = None,
                   args: Sequence[str] = ()) -> None:
        """`autoscaling_config`: the file the head's autoscaler monitor runs with (`ray start --autoscaling-config`);
        `args`: more `ray start` options (e.g. --dashboard-agent-listen-port, as a manifest's rayStartParams)."""
        subprocess.run([self.ray, "get-auth-token", "--generate"], check=True, capture_output=True, env=self.env)
        autoscaler = [f"--autoscaling-config={autoscaling_config}"] if autoscaling_config else []
        self._start("head", ["--head", f"--port={self.port}", "--dashboard-host=127.0.0.1",
                             f"--dashboard-port={self.dashboard_port}", "--include-dashboard=true",
                             f"--num-cpus={cpus}", "--num-gpus=0", f"--temp-dir={self.temp_dir}", *autoscaler, *args],
                    timeout_s=timeout_s)
        self.address = f"{self.alive_nodes()[0].node_ip}:{self.port}"  # where the GCS listens

    def add_node(self, name: str, cpus: int, resources: dict[str, float] | None = None, hidden: Path | None = None,
                 timeout_s: float = 120, args: Sequence[str] = ()) -> None:
        """Start a worker node and wait until it is alive; `hidden`: a folder it sees empty (its own tmpfs);
        `args`: more `ray start` options."""
        self._start(name, [f"--address={self.address}", f"--num-cpus={cpus}", "--num-gpus=0",
                           f"--resources={json.dumps(resources or {})}", *args], hidden, timeout_s)

    def kill_node(self, name: str, timeout_s: float = 120) -> None:
        """SIGKILL the node's whole process group, as a machine that dies; wait until Ray counts it dead."""
        self._kill_quietly(name)
        node_id = self.node_ids.pop(name, None)
        deadline = time.monotonic() + timeout_s
        while node_id in self._alive_ids():
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray node {name} still counted alive {timeout_s} s after it was killed")
            time.sleep(1)

    def preempt_node(self, name: str) -> None:
        """A spot reclaim: Ray is told the node is preempted (as the autoscaler drains a node on the cloud's
        interruption notice), then the machine is gone, at once (a test cannot wait out a 2-minute notice)."""
        subprocess.run([self.ray, "drain-node", f"--address={self.address}", f"--node-id={self.node_ids[name]}",
                        "--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=spot instance interruption",
                        "--deadline-remaining-seconds=1"], check=True, capture_output=True, env=self.env, timeout=60)
        self.kill_node(name)

    def submit(self, entrypoint: str, timeout_s: float = 120, runtime_env: dict | None = None) -> str:
        """A Ray job (the Jobs API, as `ray job submit` uses it) -> its id; `runtime_env` as `--runtime-env-json`.

        The head hands the job to a node's agent; one that has only just joined may not serve jobs yet, and the
        head answers "No available agent to submit job, please try again later": then it is tried again."""
        from ray.job_submission import JobSubmissionClient

        client, deadline = JobSubmissionClient(self.dashboard), time.monotonic() + timeout_s
        while True:
            try:
                job = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
                break
            except RuntimeError as exc:
                if "No available agent" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(2)
        self.jobs.append(job)
        return job

    def stop(self) -> None:
        """Stop its jobs, kill every node, workers first, then the head; nothing of the cluster is left running."""
        self._stop_jobs()
        for name in [n for n in self.nodes if n != "head"] + (["head"] if "head" in self.nodes else []):
            self._kill_quietly(name)
        kill_holding_files_in(self.temp_dir)  # orphans: anything of the cluster its node's tree lost
        shutil.rmtree(self.temp_dir, ignore_errors=True)  # Ray's session files and logs

    def alive_nodes(self) -> list:
        """Ray's state API: NodeState of each alive node (node_id, resources_total, is_head_node)."""
        from ray.util.state import list_nodes

        return list_nodes(address=self.dashboard, filters=[("state", "=", "ALIVE")], raise_on_missing_output=False)

    def node_id(self, resource: str) -> str:
        """The id of the alive node that has the custom `resource`."""
        return next(node.node_id for node in self.alive_nodes() if resource in node.resources_total)

    def get(self, path: str) -> dict:
        """GET the dashboard's `path` (with the cluster's auth token) -> its JSON."""
        from ray._private.authentication.http_token_authentication import get_auth_headers_if_auth_enabled

        request = urllib.request.Request(f"{self.dashboard}{path}", headers=get_auth_headers_if_auth_enabled({}))
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def _alive_ids(self) -> set[str]:
        try:
            return {node.node_id for node in self.alive_nodes()}
        except Exception:  # noqa: BLE001 - the dashboard is not up yet
            return set()

    def _stop_jobs(self) -> None:
        """Job drivers run in sessions of their own: killing the nodes would not reach them."""
        from ray.job_submission import JobSubmissionClient

        for job in self.jobs:
            try:
                JobSubmissionClient(self.dashboard).stop_job(job)
            except Exception:  # noqa: BLE001 - already ended, or the head is gone
                pass

    def _kill_quietly(self, name: str) -> None:
        """SIGKILL every process of the node: `ray start`, raylet, its agents and workers."""
        process = self.nodes.pop(name)
        _kill(process_tree(process.pid))
        process.wait()

    def _start(self, name: str, args: list[str], hidden: Path | None = None, timeout_s: float = 120) -> None:
        """`ray start --block ARGS` in a process group of its own; returns once its node is alive."""
        known = self._alive_ids()
        command = [self.ray, "start", "--block", "--disable-usage-stats", *args]
        if hidden is not None:  # a mount namespace of its own, `hidden` empty in it
            script = f"mount -t tmpfs mt-node-local {shlex.quote(str(hidden))} && exec {shlex.join(command)}"
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
        with open(self.log_dir / f"ray-{name}.log", "a") as log:
            self.nodes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd,
                                                env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (new := self._alive_ids() - known):
            if self.nodes[name].poll() is not None:
                raise RuntimeError(f"ray node {name} exited: {self._log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray node {name} was not alive within {timeout_s} s: {self._log(name)[-3000:]}")
            time.sleep(1)
        self.node_ids[name] = new.pop()

    def _log(self, name: str) -> str:
        return (self.log_dir / f"ray-{name}.log").read_text(errors="replace")
