"""The cpu image without Docker: deploy/Dockerfile's steps for its `cpu` target, read from the file (so a step changed
there is a step changed here), run into a folder that stands for the image's home, outside the checkout: the COPYs
copy the checkout's files as the build context holds them, the make steps run as written (the same targets, the
same lock, the project installed non-editable), /home/ray being that folder. The OS setup (apt-get, the user) is
the base image's and is not run. Then, from that environment alone (its bin/ray, bin/mamba-tune), a two-node Ray
as the manifests start it (a head with no CPU for trials, a worker of 2) runs a two-trial sweep that logs to a real
MLflow server, and exits 0.

This machine cannot reach download.pytorch.org, the page cpu.txt names for torch's CPU build: pip finds the same
wheel (same hash) in its find-links folder here. PIP_RETRIES=0 in the install's environment only: pip retries an
unreachable page 5 times for every package it looks up (8 s each), and here the page is known unreachable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.ray_cluster import RayCluster, running
from tests.deploy.test_dockerfile import DOCKERFILE, MAKE_INSTALL, copied, stage_steps
from tests.packaging.fresh_env import ROOT, checkout_files
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import ledger

pytestmark = pytest.mark.faults
IMAGE_HOME = "/home/ray"  # the Dockerfile's paths below it land in the test's folder
# search_spaces/smoke.yaml cut to a minute on two cores: two trials, three epochs, one finalist confirmed
SHORTER = ["--set", "trials=2", "--set", "scheduler.max_epochs=3", "--set", "confirm.top_k=1"]
CUDA_ONLY = ("nvidia-", "cuda-", "triton")  # what PyPI's linux torch brings for CUDA
READY_WITHIN_S = 300  # as the other live tests: a node of the image's Ray may start slowly on busy cores
PYTHON_INSTALL = re.compile(r"\bpip3?\b|\bpython[\d.]*\s+-m\b|\buv\b")  # a package put in other than by make


@dataclass(frozen=True)
class Image:
    home: Path  # /home/ray
    workdir: Path  # the image's WORKDIR
    env: dict[str, str]
    install_s: float  # how long the make steps took

    @property
    def bin(self) -> Path:
        return self.home / "venv" / "bin"

    def run(self, program: str, *args: object, cwd: Path, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / program), *map(str, args)], cwd=cwd, env=env or self.env,
                              capture_output=True, text=True, timeout=timeout)


def image_environment(home: Path) -> dict[str, str]:
    """This process's environment without what would put the checkout on sys.path, the image's venv first on PATH
    (the Dockerfile's ENV PATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
                                                           "VIRTUAL_ENV")}
    return {**env, "PATH": f"{home / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def in_image(path: str, home: Path) -> str:
    return path.replace(IMAGE_HOME, str(home))


def copy_from_context(args: str, workdir: Path, home: Path, context: list[str]) -> None:
    """A COPY of the build context's files (the checkout's, as git keeps them: what .dockerignore leaves)."""
    sources, destination = copied(args)
    assert not destination.startswith("/") or destination.startswith(IMAGE_HOME), destination  # never this machine's
    target = workdir / in_image(destination, home)  # an absolute destination replaces workdir
    for source in sources:
        folder = source.rstrip("/")
        chosen = context if folder == "." else [name for name in context if name == folder
                                                or name.startswith(f"{folder}/")]
        assert chosen, f"COPY {source}: no such file in the build context"
        for name in chosen:
            below = Path(name).relative_to(folder) if name != folder else Path(Path(name).name)
            (target / below).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / below)


def build_cpu_image(home: Path) -> Image:
    """deploy/Dockerfile's `cpu` target, its steps in order: WORKDIR, the COPYs, the make steps."""
    env, workdir, context, install_s = image_environment(home), home, checkout_files(), 0.0
    for keyword, args in stage_steps(DOCKERFILE.read_text())["cpu"]:
        if keyword == "WORKDIR":
            assert args.startswith(IMAGE_HOME), args  # the folder the test stands in for
            workdir = Path(in_image(args, home))
            workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            copy_from_context(args, workdir, home, context)
        elif keyword == "RUN" and MAKE_INSTALL.search(args):
            assert "~" not in args and "$HOME" not in args, args  # it would install into this machine's home
            started = time.monotonic()
            done = subprocess.run(["bash", "-c", in_image(args, home)], cwd=workdir, capture_output=True, text=True,
                                  timeout=1200, env={**env, "PIP_RETRIES": "0"})
            install_s += time.monotonic() - started
            assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-4000:])
        elif keyword == "RUN":  # the base image's OS setup: no Python package may come in this way
            assert not PYTHON_INSTALL.search(args), args
    return Image(home, workdir, env, install_s)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Image:
    home = tmp_path_factory.mktemp("image-home")
    assert not home.resolve().is_relative_to(ROOT)
    built = build_cpu_image(home)
    print(f"\nthe cpu image's make steps took {built.install_s:.0f} s")  # shown with -s: the install's cost here
    return built


PACKAGES = """
import importlib, json, sys
from importlib.metadata import distribution, distributions
import torch
url = distribution("mamba-tune").read_text("direct_url.json")
print(json.dumps({
    "names": sorted(d.metadata["Name"].lower() for d in distributions()),
    "torch": torch.__version__, "cuda": torch.version.cuda, "direct_url": json.loads(url) if url else None,
    "files": {name: importlib.import_module(name).__file__ for name in ("tuning.cli.main", "model", "search_spaces")},
}))
"""


def test_cpu_image_holds_cpu_torch_no_cuda_wheels_and_the_project_installed_not_editable(image, tmp_path):
    done = image.run("python", "-c", PACKAGES, cwd=tmp_path)  # not the working folder: its source is not the install
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["torch"] == "2.13.0+cpu" and found["cuda"] is None
    assert [name for name in found["names"] if name.startswith(CUDA_ONLY)] == []
    assert {"ray", "mlflow", "optuna", "mamba-tune"} <= set(found["names"])
    assert not (found["direct_url"] or {}).get("dir_info", {}).get("editable", False), found["direct_url"]
    site = image.home / "venv" / "lib"
    for name, file in found["files"].items():  # the venv's own copy, neither the checkout nor the working folder
        assert Path(file).is_relative_to(site) and not Path(file).is_relative_to(ROOT), (name, file)


@pytest.fixture(scope="module")
def image_cluster(image, tmp_path_factory):
    """The image's Ray as the manifests start it: a head offering trials nothing (num-cpus 0) and a worker of 2
    CPUs, both `ray start` of the image's venv, in its working folder."""
    cluster = RayCluster(tmp_path_factory.mktemp("ray-logs"), cwd=image.workdir, ray=str(image.bin / "ray"))
    cluster.env = {**image.env, **{k: v for k, v in cluster.env.items() if k.startswith("RAY_")}}
    with running(cluster, head_cpus=0, worker="worker", worker_cpus=2, timeout_s=READY_WITHIN_S):
        yield cluster


def test_cpu_image_runs_a_two_trial_sweep_on_a_two_node_ray_logging_to_mlflow(image, image_cluster, tracking_server,
                                                                                tmp_path):
    bars = image.run("mamba-tune", "data", "synth", "--out", "runs/data/bars.parquet", "--bars", "3000",
                     cwd=image.workdir)
    assert bars.returncode == 0, bars.stderr[-3000:]
    env = {**image_cluster.env, "MLFLOW_TRACKING_URI": tracking_server.url}
    sweep = image.run("mamba-tune", "sweep", "--data", "runs/data/bars.parquet", "--space", "search_spaces/smoke.yaml",
                      "--name", "image", "--address", image_cluster.address, *SHORTER, cwd=image.workdir,
                      timeout=900, env=env)
    assert sweep.returncode == 0, (sweep.stdout[-3000:], sweep.stderr[-4000:])
    printed = sweep.stdout + sweep.stderr
    assert "2 trials, " in printed and "\ntest: " in printed, printed[-4000:]  # the plan, and the winner's one look
    records = ledger(image.workdir / "runs" / "sweeps" / "image")  # relative to the image's working folder
    assert sum(r["stage"] == "search" for r in records.values()) == 2
    assert all(r["stop_reason"] != "error" for r in records.values()), records
    assert_sweep_logged(tracking_server.url, "image", records, tmp_path)
