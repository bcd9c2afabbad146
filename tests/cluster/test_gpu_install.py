"""The kernels' two ways in, checked without a GPU or nvcc: `make` on a machine with an NVIDIA GPU installs the torch
that upstream's prebuilt kernel wheels are for and those wheels by their release URLs (never a source build), then
checks the GPU (tuning.cluster.gpu_ready); `cluster/cuda-wheels.sh build`, the build that remains for a torch or CUDA
with no release wheel, stops in one line without nvcc and otherwise compiles with the flags the build honours.

make's GPU branch is dry-run (`make -n HAS_NVIDIA=yes`); the script runs against a fake nvcc, python3.11 and pip
that record what they are asked. The versions are read from cluster/locks/gpu-worker.in, as the Makefile reads them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.test_cluster_locks import TORCH_CUDA_BUILD, fake_wheel, lock, pins

ROOT = Path(__file__).resolve().parents[2]
WORKER_IN = pins(lock("gpu-worker.in"))
RELEASES = {"mamba-ssm": "https://github.com/state-spaces/mamba/releases/download",
            "causal-conv1d": "https://github.com/Dao-AILab/causal-conv1d/releases/download"}


def release_wheel_url(package: str, cuda: int, python: str = "cp311") -> str:
    """A kernel's release wheel as upstream's setup.py (get_wheel_url) names it, for gpu-worker.in's versions,
    CPython `python` (the locks' cp311 unless said) on linux x86_64 and PyPI's C++11 ABI (torch >= 2.7)."""
    version, torch = WORKER_IN[package], WORKER_IN["torch"]
    name = (f"{package.replace('-', '_')}-{version}+cu{cuda}torch{torch.major}.{torch.minor}cxx11abiTRUE"
            f"-{python}-{python}-linux_x86_64.whl")
    return f"{RELEASES[package]}/v{version}/{name}"


def make_dry_run(tmp_path: Path, *variables: str) -> list[str]:
    """The commands `make` would run to install a fresh venv (make -n), one a line."""
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "--no-print-directory", "-n", f"VENV={venv}", *variables, f"{venv}/.installed"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    joined = re.sub(r"\\\n\s*", " ", done.stdout)  # a recipe line continued with a backslash, as sh reads it
    return [line for line in joined.splitlines() if not line.startswith("#")]


def index_of(lines: list[str], needle: str) -> int:
    (found,) = [i for i, line in enumerate(lines) if needle in line]
    return found


def test_make_on_an_nvidia_machine_installs_the_pinned_torch_and_the_release_kernel_wheels(tmp_path):
    lines = make_dry_run(tmp_path, "HAS_NVIDIA=yes")
    assert WORKER_IN["torch"] == pins(lock("gpu-worker.txt"))["torch"]  # a laptop's GPU install is the workers'
    (torch,) = [i for i, line in enumerate(lines) if line.endswith('-m pip install -q "torch==2.10.0"')]
    kernels = index_of(lines, release_wheel_url("mamba-ssm", 12, "$py"))  # the venv's CPython, read by the recipe
    assert release_wheel_url("causal-conv1d", 12, "$py") in lines[kernels] and '"torch==2.10.0"' in lines[kernels]
    venv_python = str(tmp_path / "venv" / "bin" / "python")  # the line, run with this Python and pip as echo
    urls = subprocess.run(["sh", "-c", lines[kernels].replace(f"{venv_python} -m pip install -q", "echo")
                           .replace(venv_python, sys.executable)], capture_output=True, text=True, timeout=60)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert urls.stdout.split()[-2:] == [release_wheel_url(p, 12, tag) for p in ("mamba-ssm", "causal-conv1d")]
    ready, stamp = index_of(lines, "-m tuning.cluster.gpu_ready"), index_of(lines, "touch ")
    assert torch < index_of(lines, "-e '.[dev,bench,data]'") < kernels < ready < stamp  # checked once installed
    gpu = "\n".join(lines)
    for built in ("FORCE_BUILD", "--no-build-isolation", "--no-binary", "[cuda]", "cu13"):  # nothing compiled
        assert built not in gpu, built
    assert "2.13.0" not in gpu and "MAMBA_SKIP_CUDA_BUILD" not in gpu


def test_make_kernel_cuda_13_takes_the_cu13_wheels_and_torch_from_pytorchs_cu130_index(tmp_path):
    lines = make_dry_run(tmp_path, "HAS_NVIDIA=yes", "KERNEL_CUDA=13")
    torch = '"torch==2.10.0+cu130" --extra-index-url https://download.pytorch.org/whl/cu130'
    assert [line for line in lines if line.endswith(f"-m pip install -q {torch}")]  # torch first, alone
    kernels = lines[index_of(lines, release_wheel_url("mamba-ssm", 13, "$py"))]
    assert release_wheel_url("causal-conv1d", 13, "$py") in kernels and torch in kernels and "cu12" not in kernels


def run_guard(lines: list[str], needle: str, **replace: str) -> subprocess.CompletedProcess:
    """One of the branch's checks, as make would run it (after the replacements), by sh."""
    line = lines[index_of(lines, needle)]
    for old, new in replace.items():
        line = line.replace(old, new)
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)


def test_make_refuses_another_cuda_or_python_in_one_line(tmp_path):
    bad = run_guard(make_dry_run(tmp_path, "HAS_NVIDIA=yes", "KERNEL_CUDA=11"), 'case "11"')
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: KERNEL_CUDA=11")
    lines = make_dry_run(tmp_path, "HAS_NVIDIA=yes")
    assert run_guard(lines, 'case "12"').returncode == 0
    python = str(tmp_path / "venv" / "bin" / "python")
    guard = "(3, 10) <= sys.version_info[:2] <= (3, 13)"  # the Pythons upstream's release wheels are built for
    assert run_guard(lines, guard, **{python: sys.executable}).returncode == \
        (0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 2)
    other = tmp_path / "python3.14"  # a venv of another Python: its version check fails, and it says 3.14.1
    other.write_text('#!/bin/sh\ncase "$*" in *platform*) echo 3.14.1;; *) exit 1;; esac\n')
    other.chmod(0o755)
    refused = run_guard(lines, guard, **{python: str(other)})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("error: ") and "Python 3.14.1" in refused.stderr and "cp310-cp313" in refused.stderr


def test_make_without_a_gpu_keeps_the_cpu_install(tmp_path):
    lines = make_dry_run(tmp_path, "HAS_NVIDIA=")
    assert any('pip install -q "torch==2.13.0"' in line for line in lines)
    assert any(line.startswith("MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE") for line in lines)
    assert not any("gpu_ready" in line or "releases/download" in line for line in lines)


def test_make_lock_gpu_worker_constraints_are_head_txt_less_torchs_cuda_build(tmp_path):
    """make lock-gpu-worker's constraints: every head.txt pin but torch, triton, nvidia-* and cuda-* (what the GPU
    workers' torch 2.10 brings in its own versions), made by the recipe's own command."""
    out = tmp_path / "constraints.txt"
    done = subprocess.run(["make", "--no-print-directory", "-n", "lock-gpu-worker", f"GPU_WORKER_CONSTRAINTS={out}",
                           "LOCK_VENV=/nonexistent"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    script = re.sub(r"\\\n\s*", " ", done.stdout)
    (write,) = [line for line in script.splitlines() if line.startswith("grep ") and str(out) in line]
    subprocess.run(["sh", "-c", write], cwd=ROOT, check=True, timeout=60)
    head = pins(lock("head.txt"))
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==\S+", line) for line in out.read_text().splitlines())
    assert pins(out.read_text()) == {name: v for name, v in head.items() if not TORCH_CUDA_BUILD.fullmatch(name)}
    assert {"ray", "optuna", "mlflow"} <= set(pins(out.read_text())) and "torch" in head
    assert f"-c {out}" in script and "-o cluster/locks/gpu-worker.txt" in script


# --- cluster/cuda-wheels.sh build, against fakes ----------------------------------------------------------------

FAKE_PIP = """#!{python}
# Records its arguments and the build's environment; `pip wheel -w DIR NAME==VERSION...` leaves a fake wheel of each.
import json, os, sys, zipfile
args = sys.argv[1:]
keys = ("MAMBA_FORCE_BUILD", "CAUSAL_CONV1D_FORCE_BUILD", "MAX_JOBS", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST")
with open({log!r}, "a") as log:
    log.write(json.dumps({{"args": args, "env": {{k: os.environ.get(k) for k in keys}},
                          "path": os.environ["PATH"]}}) + "\\n")
if args[:1] == ["wheel"]:
    out = args[args.index("-w") + 1]
    for requirement in (a for a in args if "==" in a):
        name, version = requirement.split("==")
        stem = name.replace("-", "_") + "-" + version
        with zipfile.ZipFile(os.path.join(out, stem + "-cp311-cp311-linux_x86_64.whl"), "w") as wheel:
            wheel.writestr(stem + ".dist-info/METADATA", "Name: " + name + "\\nVersion: " + version + "\\n")
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def build_home(tmp_path):
    """A copy of the script and the locks, and a bin/ with a fake python3.11 whose `-m venv DIR` makes DIR/bin/pip
    the recording fake pip, and a fake `aws`; no nvcc anywhere the script looks (CUDA_HOME is an empty folder)."""
    (tmp_path / "cluster" / "locks").mkdir(parents=True)
    (tmp_path / "cluster" / "cuda-wheels.sh").write_text((ROOT / "cluster" / "cuda-wheels.sh").read_text())
    for name in ("gpu-worker.in", "gpu-worker.txt", "cuda-kernels.txt"):
        (tmp_path / "cluster" / "locks" / name).write_text(lock(name))
    fakes = tmp_path / "bin"
    fakes.mkdir()
    pip = executable(tmp_path / "fake-pip", FAKE_PIP.format(python=sys.executable, log=str(tmp_path / "pip.log")))
    executable(fakes / "python3.11", f'#!/bin/sh\n[ "$1 $2" = "-m venv" ] && mkdir -p "$3/bin" && cp {pip} "$3/bin/pip"\n')
    executable(fakes / "aws", f'#!/bin/sh\necho "$@" >> {tmp_path}/aws.log\n')
    (tmp_path / "no-cuda").mkdir()
    return tmp_path


def wheels_script(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {"HOME": str(home), "PATH": f"{home}/bin:/usr/bin:/bin", "CUDA_HOME": str(home / "no-cuda"), **env}
    return subprocess.run(["bash", str(home / "cluster" / "cuda-wheels.sh"), *args], env=base, capture_output=True,
                          text=True, timeout=120)


def fake_nvcc(home: Path, release: str) -> Path:
    cuda = home / f"cuda-{release}"
    (cuda / "bin").mkdir(parents=True)
    executable(cuda / "bin" / "nvcc", "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
               f"echo 'Cuda compilation tools, release {release}, V{release}.61'\n")
    return cuda


def pip_calls(home: Path) -> list[dict]:
    log = home / "pip.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_cuda_wheels_build_without_nvcc_stops_in_one_line(build_home):
    result = wheels_script(build_home, "build", str(build_home / "out"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("cuda-wheels: no nvcc")
    assert "CUDA 12" in result.stderr  # the toolkit it needs: gpu-worker.txt's torch's CUDA
    assert pip_calls(build_home) == [] and not (build_home / "out").exists()  # nothing started


def test_cuda_wheels_build_refuses_an_nvcc_of_another_cuda_major(build_home):
    result = wheels_script(build_home, "build", str(build_home / "out"), CUDA_HOME=str(fake_nvcc(build_home, "13.0")))
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "CUDA 13.0" in result.stderr and "CUDA 12" in result.stderr and pip_calls(build_home) == []


def test_cuda_wheels_build_compiles_both_kernels_with_the_flags_the_build_honours(build_home):
    cuda = fake_nvcc(build_home, "12.8")
    out = build_home / "out"
    result = wheels_script(build_home, "build", str(out), CUDA_HOME=str(cuda))
    assert result.returncode == 0, result.stderr
    install, tools, wheel = pip_calls(build_home)
    assert install["args"][:4] == ["install", "-q", "--require-hashes", "--only-binary"]
    assert install["args"][-1].endswith("cluster/locks/gpu-worker.txt")  # the venv is the workers' lock
    assert {"ninja", "wheel"} <= set(tools["args"])
    assert wheel["args"][0] == "wheel" and {"--no-deps", "--no-build-isolation", "-w", str(out)} <= set(wheel["args"])
    assert wheel["args"][-2:] == [f"mamba-ssm=={WORKER_IN['mamba-ssm']}", f"causal-conv1d=={WORKER_IN['causal-conv1d']}"]
    env = wheel["env"]
    assert env["MAMBA_FORCE_BUILD"] == env["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE" and env["CUDA_HOME"] == str(cuda)
    assert 1 <= int(env["MAX_JOBS"]) <= os.cpu_count()
    assert env["TORCH_CUDA_ARCH_LIST"] is None  # not set: upstream's hard-coded -gencode list decides
    assert wheel["path"].split(":")[0] == str(out / "venv" / "bin")  # ninja found where torch looks for it
    assert sorted(p.name.split("-")[0] for p in out.glob("*.whl")) == ["causal_conv1d", "mamba_ssm"]
    assert "MAX_JOBS=" in result.stderr and "an hour" in result.stderr
    wheels_script(build_home, "build", str(build_home / "out2"), CUDA_HOME=str(cuda), MAX_JOBS="3")
    assert pip_calls(build_home)[-1]["env"]["MAX_JOBS"] == "3"  # the caller's choice kept


def test_cuda_wheels_publish_without_wheels_builds_them_then_publishes(build_home):
    result = wheels_script(build_home, "publish", "bucket", CUDA_HOME=str(fake_nvcc(build_home, "12.8")))
    assert result.returncode == 0, result.stderr
    assert (build_home / "aws.log").read_text().count("s3://bucket/wheels/") == 2
    written = (build_home / "cluster" / "locks" / "cuda-kernels.txt").read_text()
    assert f"mamba-ssm=={WORKER_IN['mamba-ssm']} --hash=sha256:" in written
    assert f"causal-conv1d=={WORKER_IN['causal-conv1d']} --hash=sha256:" in written
    # and a release wheel given by name is published as it is: no build
    named = fake_wheel(build_home / Path(release_wheel_url("mamba-ssm", 12)).name)
    conv = fake_wheel(build_home / Path(release_wheel_url("causal-conv1d", 12)).name)
    calls = len(pip_calls(build_home))
    assert wheels_script(build_home, "publish", "bucket", str(named), str(conv)).returncode == 0
    assert len(pip_calls(build_home)) == calls
    assert "mamba-ssm==2.3.2.post1+cu12torch2.10cxx11abiTRUE --hash=" in \
        (build_home / "cluster" / "locks" / "cuda-kernels.txt").read_text()
