"""The oldest Ray mamba-tune admits, as a user who has it installs mamba-tune: a venv of its own (its own
site-packages, nothing of the test venv's), Ray's oldest admitted minor (pyproject's floor, its newest patch), and
the project's wheel with the dependencies pip resolves for it; and a Ray head of that venv, started as a team's
cluster is (`ray start --head`), for a driver of another Ray to join.

torch is installed first and alone, as `make` installs it (the Makefile: `pip install "torch==$(TORCH_VERSION)"
$(TORCH_CPU_ARGS)`): `torch==2.13.0` with the pip arguments in the environment variable TORCH_CPU_ARGS (shlex-split;
none by default), the same torch the test venv runs. Where pip's own configuration already finds the CPU build (this
machine's find-links) none are needed; on a machine whose pip would take PyPI's CUDA build (gigabytes), set
TORCH_CPU_ARGS="--index-url https://download.pytorch.org/whl/cpu" as for `make`. Left to the resolver with Ray, pip
could take the CUDA build too: hence alone, first. The test checks the CPU build is what came in.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.cli import free_port
from tests.cluster.ray_cluster import kill_holding_files_in
from tests.packaging.fresh_env import FreshEnv
from tests.processes import process_tree
from tuning.sweep.ray_version import EXTRAS, OLDEST_RAY

TORCH = "torch==2.13.0"  # the test venv's (the Makefile's TORCH_VERSION), its CPU build
TORCH_CPU_ARGS = "TORCH_CPU_ARGS"  # the environment variable of extra pip arguments for it, as for `make`
INSTALL_TIMEOUT_S = 600  # each pip install, on a cold cache: Ray and MLflow with their dependencies from PyPI
READY_WITHIN_S = 300  # a head of Ray's own start on busy cores


def torch_cpu_args() -> list[str]:
    """The extra pip arguments for torch's CPU build, as `make` passes them: $TORCH_CPU_ARGS shlex-split (none when
    unset), e.g. ["--index-url", "https://download.pytorch.org/whl/cpu"]."""
    return shlex.split(os.environ.get(TORCH_CPU_ARGS, ""))


@dataclass(frozen=True)
class OldestRay:
    """The venv with the oldest admitted Ray and the wheel; `install_s`: the pip installs' seconds, all told."""

    env: FreshEnv
    floor: str  # the minor asked for: "2.56"
    install_s: float

    @property
    def bin(self) -> Path:
        return self.env.root / "bin"


def oldest_ray_env(folder: Path, wheel: Path) -> OldestRay:
    """A new venv in `folder` off the base interpreter with pip, torch's CPU build (with torch_cpu_args), Ray's
    oldest admitted minor (`ray[default,train,tune]==FLOOR.*`: pip takes its newest patch) and `wheel` with its
    dependencies."""
    _run(sys._base_executable, "-m", "venv", folder, cwd=folder.parent)  # with pip: the venv's own
    python, floor = folder / "bin" / "python", OLDEST_RAY
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=folder.parent).strip())
    env = FreshEnv(folder, site)
    started = time.monotonic()
    for packages in ([TORCH, *torch_cpu_args()], [f"ray[{EXTRAS}]=={floor}.*", wheel]):
        _run(python, "-m", "pip", "install", "-q", *packages, cwd=folder.parent, env=env.environment(),
             timeout=INSTALL_TIMEOUT_S)
    return OldestRay(env, floor, time.monotonic() - started)


@contextmanager
def ray_head(ray: Path, cwd: Path, log: Path, env: dict[str, str]) -> Iterator[str]:
    """`ray start --head --block` of the program `ray` (another venv's: its Ray), one CPU, no dashboard, its own
    temp folder and ports; yields its address 127.0.0.1:PORT once Ray says it started. Every process of it is killed
    at the end, even when the start or the test fails: its process tree, then anything holding a file in its temp
    folder (no `ray stop`: it would stop every Ray of this machine's user)."""
    temp_dir = tempfile.mkdtemp(prefix="mt-old-", dir="/tmp")  # short: Ray's socket paths must fit
    port = free_port()
    # Ports of their own for what listens on a fixed one by default (a minimal dashboard runs even without
    # --include-dashboard, the client server, the agent): another Ray on this machine may hold those.
    command = [str(ray), "start", "--block", "--disable-usage-stats", "--head", f"--port={port}", "--num-cpus=1",
               "--num-gpus=0", "--include-dashboard=false", f"--dashboard-port={free_port()}",
               f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
               f"--temp-dir={temp_dir}"]
    with open(log, "a") as output:
        head = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None, f"ray start exited {head.returncode}: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no Ray head within {READY_WITHIN_S} s: {log.read_text()[-3000:]}"
            time.sleep(1)
        yield f"127.0.0.1:{port}"
    finally:
        for pid in process_tree(head.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        head.wait()
        kill_holding_files_in(temp_dir)  # orphans: anything of the head its process tree lost
        shutil.rmtree(temp_dir, ignore_errors=True)


def _run(*args: object, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    """ARGS in `cwd`, a folder outside the checkout; -> stdout."""
    done = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout
