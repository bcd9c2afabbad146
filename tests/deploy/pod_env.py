"""What a container has in its environment, for a test that runs the container's commands here: its `env` entries
(as the manifest writes them, or as KubeRay gives them: kuberay_auth.operator_containers), each secretKeyRef read
from secrets the test names (as Kubernetes reads the namespace's), on a bare base (PATH with this checkout's venv
first, as the image's PATH has /home/ray/venv/bin, and an empty HOME: no ~/.ray/auth_token to fall back on).
envFrom and fieldRef entries are left out: the commands tested do not read them.

`process_token` puts a token in this test process's own environment, where Ray's clients here (the state API a
RayCluster waits with) read it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
IMAGE_VENV_PYTHON = "/home/ray/venv/bin/python"  # the image's (deploy/Dockerfile: make install-locked VENV=...)
TOKEN = "RAY_AUTH_TOKEN"


def container_env(container: dict, secrets: dict[str, dict[str, str]], home: Path) -> dict[str, str]:
    """The environment `container` gets, `secrets` as {secret name: {key: value}}; a key missing fails, as a pod's
    start does."""
    env = {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = secrets[ref["name"]][ref["key"]]
    return env


def secret_refs(container: dict) -> dict[str, tuple[str, str]]:
    """Each env variable the container takes from a secret -> (secret, key)."""
    return {var["name"]: (var["valueFrom"]["secretKeyRef"]["name"], var["valueFrom"]["secretKeyRef"]["key"])
            for var in container.get("env", []) if "secretKeyRef" in var.get("valueFrom", {})}


@contextmanager
def process_token(token: str) -> Iterator[None]:
    """RAY_AUTH_TOKEN=token in this process while the context lasts (Ray caches the token: its cache is reset)."""
    from ray._raylet import AuthenticationTokenLoader

    saved = os.environ.get(TOKEN)
    os.environ[TOKEN] = token
    AuthenticationTokenLoader.instance().reset_cache()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(TOKEN, None)
        else:
            os.environ[TOKEN] = saved
        AuthenticationTokenLoader.instance().reset_cache()
