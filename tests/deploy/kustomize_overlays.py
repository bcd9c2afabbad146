"""deploy/kuberay's overlays as Kubernetes receives them: rendered by `kubectl kustomize` (kustomize v5, built into
kubectl), the objects of `kubectl apply -k`. kubectl is required, here and in CI: without it a test fails."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "deploy" / "kuberay"
OVERLAYS = ("eks", "gke", "local")


def kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is not on PATH: the overlays are checked as kubectl renders them (install kubectl >= 1.27)"
    return found


def render(folder: Path) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k folder` would send."""
    done = subprocess.run([kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@functools.cache
def rendered(overlay: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The shipped overlay's objects by (kind, name)."""
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in render(KUBERAY / "overlays" / overlay)}


def pod_specs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod specs of a RayCluster (head, each worker group) or a Deployment, by where they stand."""
    if doc["kind"] == "RayCluster":
        spec = doc["spec"]
        return {"head": spec["headGroupSpec"]["template"]["spec"],
                **{group["groupName"]: group["template"]["spec"] for group in spec["workerGroupSpecs"]}}
    if doc["kind"] == "Deployment":
        return {doc["metadata"]["name"]: doc["spec"]["template"]["spec"]}
    return {}


def images(data: Any) -> list[str]:
    """Every `image` of containers and init containers anywhere in `data`."""
    if isinstance(data, dict):
        return [*([data["image"]] if isinstance(data.get("image"), str) and "name" in data else []),
                *(image for value in data.values() for image in images(value))]
    if isinstance(data, list):
        return [image for item in data for image in images(item)]
    return []


def has_registry(image: str) -> bool:
    """Whether the image names its registry, as Docker reads a name: a first part with a '.' or ':', or localhost
    (otherwise it is looked for on Docker Hub). deploy/kuberay/check.sh applies the same rule."""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")
