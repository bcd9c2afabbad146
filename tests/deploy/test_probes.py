"""The manifests' readiness and liveness probes: on the head and on every worker group's Ray container, KubeRay 1.4's
checks (the same endpoints, on the ports Ray listens on) and KubeRay's timings (1.4's and 1.7's alike), in a command
the image has; and what KubeRay's own probes need, for a container left without: 1.4's programs in the image, 1.7's
HTTP check on the agent port Ray listens on. Pure file checks: test_probes_live.py runs them."""

from __future__ import annotations

import re

import pytest

from tests.deploy.kuberay_manifests import ROOT, container, groups
from tests.deploy.kuberay_probes import (
    AGENT_PORT,
    DASHBOARD_PORT,
    DEFAULT_COMMANDS,
    DEFAULT_TIMINGS,
    PROBES,
    UNIFIED_HEALTH_PATH,
    kuberay_1_7_default,
    probe_urls,
    programs_called,
)
from tests.deploy.pod_env import IMAGE_VENV_PYTHON

# Debian's Essential packages: in every Debian image, python:3.11-slim-bookworm's too, whatever apt-get installs
DEBIAN_ESSENTIAL = {"bash", "grep", "sed"}


def ray_nodes(cluster: dict) -> dict[str, tuple[str, dict, dict]]:
    """Each Ray container -> (node type, the container, its group's rayStartParams)."""
    head = cluster["spec"]["headGroupSpec"]
    nodes = {"head": ("head", container(head), head["rayStartParams"])}
    nodes |= {name: ("worker", container(group), group["rayStartParams"]) for name, group in groups(cluster).items()}
    return nodes


def probe_code(probe: dict) -> str:
    """The Python a probe runs: its exec command must be the image's venv Python."""
    python, flag, code = probe["exec"]["command"]
    assert (python, flag) == (IMAGE_VENV_PYTHON, "-c")
    compile(code, "probe", "exec")
    return code


def test_every_ray_container_has_both_probes_with_kuberays_timings(cluster):
    for name, (node, spec, _) in ray_nodes(cluster).items():
        for probe in PROBES:
            timings = {key: value for key, value in spec[probe].items() if key != "exec"}
            assert timings == DEFAULT_TIMINGS[node, probe], (name, probe)
        assert spec["readinessProbe"]["exec"] == spec["livenessProbe"]["exec"], name  # one check, as KubeRay's


def test_probes_ask_kuberays_endpoints_on_the_ports_ray_listens_on(cluster):
    for name, (node, spec, params) in ray_nodes(cluster).items():
        agent = int(params["dashboard-agent-listen-port"])  # pinned: Ray would take it, and the probe asks it
        # KubeRay 1.4's own probes ask 52365 and 8265 whatever rayStartParams say: Ray must listen there
        assert agent == AGENT_PORT and int(params.get("dashboard-port", DASHBOARD_PORT)) == DASHBOARD_PORT
        assert probe_urls(probe_code(spec["readinessProbe"])) == probe_urls(DEFAULT_COMMANDS[node]), name
    head_ports = {port["name"]: port["containerPort"] for port in container(cluster["spec"]["headGroupSpec"])["ports"]}
    assert head_ports["dashboard"] == DASHBOARD_PORT


def test_probe_python_is_the_venv_the_image_installs():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    venv = IMAGE_VENV_PYTHON.removesuffix("/bin/python")
    venvs = re.findall(r"^RUN make .*\bVENV=(\S+)", dockerfile, re.M)  # every install goes to the one venv
    assert venvs and set(venvs) == {venv}, venvs


def apt_installed(dockerfile: str) -> set[str]:
    """The packages the Dockerfile's apt-get install lines name."""
    joined = dockerfile.replace("\\\n", " ")
    return {word for line in re.findall(r"apt-get install ([^&\n]*)", joined) for word in line.split()
            if not word.startswith("-")}


@pytest.mark.parametrize("node", sorted(DEFAULT_COMMANDS))
def test_image_has_what_kuberays_default_probes_call(node):
    """A Ray container without probes of its own (a group added later) gets KubeRay's wget | grep."""
    have = apt_installed((ROOT / "deploy" / "Dockerfile").read_text()) | DEBIAN_ESSENTIAL
    assert programs_called(DEFAULT_COMMANDS[node]) <= have


def test_kuberay_1_7s_default_check_would_ask_the_agent_port_ray_listens_on(cluster):
    """Without probes of their own, KubeRay 1.7 would GET the agent's /api/healthz on every Ray container (rayVersion
    >= 2.53): on the port rayStartParams pin, the one test_probes_live.py asks."""
    version = cluster["spec"]["rayVersion"]
    for name, (node, _, params) in ray_nodes(cluster).items():
        default = kuberay_1_7_default(version, node, int(params["dashboard-agent-listen-port"]))
        assert default == {"httpGet": {"path": UNIFIED_HEALTH_PATH, "port": AGENT_PORT}}, name
