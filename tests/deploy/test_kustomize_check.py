"""deploy/kuberay/check.sh OVERLAY: an overlay that leaves out a value the base leaves to the site (the images'
registry, the bucket, a setting) is refused before `kubectl apply -k`, in one line naming the value, exit 2; the
shipped overlays pass. Run as a user runs it, on a copy of deploy/kuberay with one overlay changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.kustomize_overlays import KUBERAY, OVERLAYS, kubectl

CHECK = KUBERAY / "check.sh"


def check(folder: Path, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    return subprocess.run(["bash", str(CHECK), str(folder)], capture_output=True, text=True, timeout=120, env=env)


def assert_refused(done: subprocess.CompletedProcess, overlay: str, what: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith(f"error: overlay {overlay}: {what}"), done.stderr
    assert done.stderr.count("\n") == 1 and ", rule: " in done.stderr and ", fix: " in done.stderr, done.stderr


@pytest.fixture
def mysite(tmp_path) -> Path:
    """deploy/kuberay copied, with overlays/mysite a copy of the eks overlay, as docs/kubernetes.md starts one."""
    kubectl()
    shutil.copytree(KUBERAY, tmp_path / "kuberay")
    shutil.copytree(tmp_path / "kuberay" / "overlays" / "eks", tmp_path / "kuberay" / "overlays" / "mysite")
    return tmp_path / "kuberay" / "overlays" / "mysite"


def edit(overlay: Path, change) -> None:
    file = overlay / "kustomization.yaml"
    values = yaml.safe_load(file.read_text())
    change(values)
    file.write_text(yaml.safe_dump(values))


def settings(values: dict) -> list[str]:
    (generator,) = values["configMapGenerator"]
    return generator["literals"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_shipped_overlays_pass(overlay):
    kubectl()
    done = check(KUBERAY / "overlays" / overlay)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"overlay {overlay}: ready")


def test_an_overlay_as_copied_passes(mysite):
    done = check(mysite)
    assert done.returncode == 0, done.stderr


def test_an_overlay_without_the_images_registry_is_refused(mysite):
    edit(mysite, lambda values: values.pop("images"))
    assert_refused(check(mysite), "mysite", "the image mamba-tune has no registry (mamba-tune:")


def test_an_image_named_without_a_registry_is_refused(mysite):
    edit(mysite, lambda values: values["images"][0].update(newName="team/mamba-tune"))  # Docker Hub's, by default
    assert_refused(check(mysite), "mysite", "the image team/mamba-tune has no registry")


@pytest.mark.parametrize("setting", ["MAMBA_TUNE_STORAGE", "MLFLOW_ARTIFACTS_DESTINATION", "MLFLOW_BACKEND_STORE_URI",
                                     "MLFLOW_TRACKING_URI"])
def test_an_overlay_without_a_setting_is_refused(mysite, setting):
    edit(mysite, lambda values: settings(values).remove(next(s for s in settings(values) if s.startswith(setting))))
    assert_refused(check(mysite), "mysite", f"the setting {setting} is not set")


def test_an_empty_bucket_is_refused(mysite):
    def empty(values: dict) -> None:
        literals = settings(values)
        literals[:] = ["MAMBA_TUNE_STORAGE=" if s.startswith("MAMBA_TUNE_STORAGE=") else s for s in literals]

    edit(mysite, empty)
    assert_refused(check(mysite), "mysite", "the setting MAMBA_TUNE_STORAGE is not set")


def test_a_password_in_the_settings_is_refused_unshown(mysite):
    def with_password(values: dict) -> None:
        literals = settings(values)
        literals[:] = [s.replace("postgresql://mlflow@", "postgresql://mlflow:hunter2@") for s in literals]

    edit(mysite, with_password)
    done = check(mysite)
    assert_refused(done, "mysite", "the setting MLFLOW_BACKEND_STORE_URI holds a password")
    assert "hunter2" not in done.stderr


def test_an_overlay_that_does_not_render_is_refused(mysite):
    (mysite / "gpu-nodes.yaml").unlink()
    assert_refused(check(mysite), "mysite", "kubectl kustomize")


def test_without_kubectl_the_check_says_so(mysite, tmp_path):
    tools = tmp_path / "bin"  # what the script needs, but kubectl
    tools.mkdir()
    for tool in ("bash", "basename", "sed", "awk", "grep"):
        (tools / tool).symlink_to(shutil.which(tool))
    assert_refused(check(mysite, path=str(tools)), "mysite", "kubectl is not installed")
