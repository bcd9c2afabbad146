"""KubeRay's own probes, the ones it injects into a Ray container that defines none, as text: 1.4's commands, 1.7's
HTTP check, the timings the manifests' explicit probes keep, and the programs a probe command calls.

Taken from ray-project/kuberay at tag v1.4.2: ray-operator/controllers/ray/utils/constant.go (BaseWgetHealthCommand,
DefaultDashboardAgentListenPort 52365, DefaultDashboardPort 8265, RayAgentRayletHealthPath, RayDashboardGCSHealthPath,
Default*Probe* values) and ray-operator/controllers/ray/common/pod.go (initLivenessAndReadinessProbe: the head checks
the raylet and the GCS, a worker the raylet; `bash -c` of the checks joined by ` && `). Its GCS check's wget timeout
is DefaultReadinessProbeFailureThreshold (10), as KubeRay writes it. 1.5.2 injects the same wget commands.

KubeRay 1.7.0 (the version docs/kubernetes.md installs; the same since 1.6), at tag v1.7.0: pod.go
initLivenessAndReadinessProbe, for a rayVersion >= 2.53 (supportsUnifiedHealthCheck), injects on the head and on
workers alike an HTTP GET of the dashboard agent's /api/healthz (utils/constant.go RayNodeHealthPath) on the port
rayStartParams' dashboard-agent-listen-port names (else 52365), and the wget commands above below 2.53; its
timings (utils/constant.go Default*Probe*) are 1.4's, unchanged. Its RayJob submitter waits for the GCS with
Python's urllib (BasePythonHealthCommand), which the manifests' probes follow.
"""

from __future__ import annotations

import re
import shlex

AGENT_PORT, DASHBOARD_PORT = 52365, 8265
_WGET = "wget --tries 1 -T {timeout} -q -O- http://localhost:{port}/{path} | grep success"
RAYLET_CHECK = _WGET.format(timeout=2, port=AGENT_PORT, path="api/local_raylet_healthz")
GCS_CHECK = _WGET.format(timeout=10, port=DASHBOARD_PORT, path="api/gcs_healthz")
# node type -> the command KubeRay runs: ["bash", "-c", this]
DEFAULT_COMMANDS = {"head": f"{RAYLET_CHECK} && {GCS_CHECK}", "worker": RAYLET_CHECK}

# KubeRay 1.7's HTTP probe for Ray >= 2.53, head and worker: GET this path on the agent's port
UNIFIED_HEALTH_PATH, UNIFIED_HEALTH_MIN_RAY = "/api/healthz", (2, 53)

# (node type, probe) -> KubeRay's timings (1.4.2 and 1.7.0 alike); a head's probe waits longer: it asks two endpoints
_READINESS = {"initialDelaySeconds": 10, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 10}
_LIVENESS = {"initialDelaySeconds": 30, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 120}
DEFAULT_TIMINGS = {("head", "readinessProbe"): {**_READINESS, "timeoutSeconds": 5},
                   ("head", "livenessProbe"): {**_LIVENESS, "timeoutSeconds": 5},
                   ("worker", "readinessProbe"): {**_READINESS, "timeoutSeconds": 2},
                   ("worker", "livenessProbe"): {**_LIVENESS, "timeoutSeconds": 2}}
PROBES = ("readinessProbe", "livenessProbe")
# What a probe asks: http://localhost:PORT/PATH
URL = re.compile(r"http://localhost:(\d+)(/[\w/]+)")


def kuberay_1_7_default(ray_version: str, node: str, agent_port: int = AGENT_PORT) -> dict:
    """The check KubeRay 1.7 would inject into the node's Ray container: {"httpGet": ...} or {"exec": ...}."""
    if tuple(int(part) for part in ray_version.split(".")[:2]) >= UNIFIED_HEALTH_MIN_RAY:
        return {"httpGet": {"path": UNIFIED_HEALTH_PATH, "port": agent_port}}
    return {"exec": {"command": ["bash", "-c", DEFAULT_COMMANDS[node]]}}


def http_probe_passes(host: str, port: int, path: str, timeout_s: float) -> bool:
    """A kubelet HTTP GET probe: it passes on a status from 200 to 399 within the timeout, fails on any other answer
    or none (the kubelet asks the pod's IP: the node's address here)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout_s) as answer:
            return 200 <= answer.status < 400
    except (urllib.error.URLError, OSError):  # HTTPError (4xx, 5xx) is a URLError
        return False


def probe_urls(command: str) -> list[tuple[int, str]]:
    """(port, path) of each URL a probe command asks, in order."""
    return [(int(port), path) for port, path in URL.findall(command)]


def with_ports(command: str, ports: dict[int, int]) -> str:
    """The command with each localhost port `ports` names swapped for its value, and nothing else changed (a test's
    nodes listen on free ports, not on the manifests')."""
    return URL.sub(lambda m: f"http://localhost:{ports.get(int(m.group(1)), int(m.group(1)))}{m.group(2)}", command)


def programs_called(shell_command: str) -> set[str]:
    """The programs a shell command line runs: the first word of each part between `|`, `&&`, `||` and `;`."""
    parts = re.split(r"\|\||&&|[|;]", shell_command)
    return {shlex.split(part)[0] for part in parts if part.strip()}
