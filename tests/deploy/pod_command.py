"""A container's environment and command line as the kubelet builds them from a manifest, for tests that run the
manifest's own command here: env sources looked up in stand-ins for the cluster's ConfigMaps, Secrets and the pod's
fields, then `$(VAR)` in values, command and args expanded as Kubernetes does.

Kubernetes' rules (third_party/forked/golang/expansion): `$(VAR)` becomes VAR's value when the container defines VAR
(earlier in env, or through envFrom), and stays as written when it does not; `$$` is a literal `$`.
"""

from __future__ import annotations

import re

REFERENCE = re.compile(r"\$\$|\$\(([^()$]+)\)")


def expand(text: str, env: dict[str, str]) -> str:
    return REFERENCE.sub(lambda found: "$" if found.group(0) == "$$" else env.get(found.group(1), found.group(0)),
                         text)


def container_env(container: dict, config_maps: dict[str, dict[str, str]], secrets: dict[str, dict[str, str]],
                  fields: dict[str, str]) -> dict[str, str]:
    """The variables the container starts with (those of the image aside). A required ConfigMap, Secret or key that
    the stand-ins lack raises KeyError, as the kubelet refuses to start the container."""
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
