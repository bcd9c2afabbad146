"""deploy/kuberay's files as written (the base, rayjob.yaml), read for the tests: the manifests in a file by kind, a
RayCluster's worker groups by name, a group's one container. The overlays as kubectl renders them:
kustomize_overlays.py."""

from __future__ import annotations

import yaml

from tests.deploy.kustomize_overlays import KUBERAY, ROOT

__all__ = ["KUBERAY", "ROOT", "container", "documents", "groups"]


def documents(name: str) -> dict[str, dict]:
    """The file's manifests by kind (`name` below deploy/kuberay)."""
    return {doc["kind"]: doc for doc in yaml.safe_load_all((KUBERAY / name).read_text()) if doc}


def groups(cluster: dict) -> dict[str, dict]:
    """A RayCluster's worker groups by groupName, in order."""
    return {group["groupName"]: group for group in cluster["spec"]["workerGroupSpecs"]}


def container(group: dict) -> dict:
    """The group's (head's or worker group's) only container."""
    (only,) = group["template"]["spec"]["containers"]
    return only
