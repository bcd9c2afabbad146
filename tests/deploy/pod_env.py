"""A container's environment and command line as the kubelet builds them from a manifest, for tests that run the
manifest's own commands here: `container_env` looks the container's envFrom and env sources up in stand-ins for the
namespace's ConfigMaps and Secrets and the pod's fields, then expands `$(VAR)` in values, command and args as
Kubernetes does; `base_env` is the bare base a test runs them on (the image's own variables: PATH with this
checkout's venv first, as the image's PATH has /home/ray/venv/bin, and an empty HOME: no ~/.ray/auth_token to fall
back on). A container as the manifest writes it, or as KubeRay gives it (kuberay_auth.operator_containers).

Kubernetes' rules (third_party/forked/golang/expansion): `$(VAR)` becomes VAR's value when the container defines VAR
(earlier in env, or through envFrom), and stays as written when it does not; `$$` is a literal `$`. envFrom comes
first, in order (a key in two sources: the later one's), then env (a name in both: env's).

`process_token` puts a token in this test process's own environment, where Ray's clients here (the state API a
RayCluster waits with) read it."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
IMAGE_VENV_PYTHON = "/home/ray/venv/bin/python"  # the image's (deploy/Dockerfile: make install-locked VENV=...)
TOKEN = "RAY_AUTH_TOKEN"
REFERENCE = re.compile(r"\$\$|\$\(([^()$]+)\)")
Stores = Mapping[str, Mapping[str, str]]  # {ConfigMap or Secret name: {key: value}}


def expand(text: str, env: dict[str, str]) -> str:
    return REFERENCE.sub(lambda found: "$" if found.group(0) == "$$" else env.get(found.group(1), found.group(0)),
                         text)


def base_env(home: Path) -> dict[str, str]:
    """What the image gives every container before the manifest's variables."""
    return {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}


def container_env(container: dict, config_maps: Stores | None = None, secrets: Stores | None = None,
                  fields: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the container starts with (those of the image aside), `fields` the pod's by fieldPath. A
    required ConfigMap, Secret or key, or a field, that the stand-ins lack raises KeyError, as the kubelet refuses to
    start the container; an optional one is left out."""
    config_maps, secrets, fields = config_maps or {}, secrets or {}, fields or {}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        kind, stores = ("configMapRef", config_maps) if "configMapRef" in source else ("secretRef", secrets)
        ref = source[kind]
        if ref["name"] in stores or not ref.get("optional", False):
            env.update({source.get("prefix", "") + key: value for key, value in stores[ref["name"]].items()})
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = expand(variable["value"], env)
            continue
        source = variable["valueFrom"]
        if "fieldRef" in source:
            env[variable["name"]] = fields[source["fieldRef"]["fieldPath"]]
            continue
        kind, stores = ("configMapKeyRef", config_maps) if "configMapKeyRef" in source else ("secretKeyRef", secrets)
        ref = source[kind]
        value = stores.get(ref["name"], {}).get(ref["key"])
        if value is not None:
            env[variable["name"]] = value
        elif not ref.get("optional", False):
            raise KeyError(f"{kind} {ref['name']}/{ref['key']}: the kubelet would not start the container")
    return env


def command_line(container: dict, env: dict[str, str]) -> list[str]:
    """The container's command and args with `$(VAR)` expanded (a manifest that sets command has no entrypoint)."""
    return [expand(word, env) for word in [*container.get("command", []), *container.get("args", [])]]


def secret_refs(container: dict) -> dict[str, tuple[str, str]]:
    """Each env variable the container takes from a secret's key -> (secret, key)."""
    return {var["name"]: (var["valueFrom"]["secretKeyRef"]["name"], var["valueFrom"]["secretKeyRef"]["key"])
            for var in container.get("env", []) if "secretKeyRef" in var.get("valueFrom", {})}


def env_from_secrets(container: dict) -> dict[str, bool]:
    """Each secret the container takes whole through envFrom -> whether it is optional."""
    return {source["secretRef"]["name"]: source["secretRef"].get("optional", False)
            for source in container.get("envFrom", []) if "secretRef" in source}


@contextmanager
def process_token(token: str) -> Iterator[None]:
    """RAY_AUTH_TOKEN=token in this process while the context lasts (Ray caches the token: its cache is reset)."""
    from ray._raylet import AuthenticationTokenLoader

    from tests.cluster.ray_cluster import environment_variable

    with environment_variable(TOKEN, token, lambda: AuthenticationTokenLoader.instance().reset_cache()):
        yield
