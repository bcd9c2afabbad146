"""Identical nodes: cluster/locks/ pins every package exactly, with hashes, in versions pyproject.toml allows, and
cluster.yaml installs nothing else; the CUDA kernels come as hash-pinned wheels or the worker's setup stops. The GPU
workers' torch (and what its CUDA build brings) is the one the kernels publish release wheels for, not the head's;
every other package they share is at the head's version.

Pure file checks (and the kernels script run against fakes): no Ray, no AWS, no network. Each check lists what it
finds wrong and is shown catching a broken copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib  # 3.11+; ruff (target 3.10) files it with the third-party modules
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "cluster" / "locks"
SHARED = ["ray", "torch", "mlflow", "optuna", "pyarrow"]  # what head and workers must both have
# What the GPU workers pin apart from the head (the Makefile's TORCH_CUDA_BUILD): torch and its CUDA build's packages
TORCH_CUDA_BUILD = re.compile(r"torch|triton|(nvidia|cuda)-.*")
KERNELS = ("mamba-ssm", "causal-conv1d")
# The torch versions (major.minor) and CUDA majors with upstream's release wheels of mamba-ssm 2.3.2.post1 and
# causal-conv1d 1.7.0 (their publish.yaml matrices, less the excluded pairs). Move with gpu-worker.in's pins.
RELEASE_WHEELS = {"mamba-ssm": "2.3.2.post1", "causal-conv1d": "1.7.0"}
RELEASE_TORCH_CUDA = {"2.6": {11, 12}, "2.7": {11, 12}, "2.8": {12}, "2.9": {12, 13}, "2.10": {12, 13}}
# The nodes: CPython 3.11 on linux x86_64, for the markers of pyproject's requirements.
NODE = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux", "platform_system": "Linux",
        "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython", "extra": ""}
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def entries(text: str) -> list[str]:
    """A requirements file's entries, each on one line (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in (re.sub(r"(^|\s)#.*", "", raw) for raw in joined.splitlines()) if line.strip()]


def lock_problems(text: str) -> list[str]:
    """Entries that are not one exact `NAME==VERSION` with sha256 hashes: all pip's --require-hashes accepts."""
    problems = []
    for entry in entries(text):
        requirement, *hashes = re.split(r"\s+--hash=", entry)
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement:
            problems.append(f"not a requirement: {entry[:60]}")
            continue
        specifiers = list(parsed.specifier)
        if parsed.url or len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
            problems.append(f"not pinned with ==: {requirement}")
        if not hashes or not all(SHA256.fullmatch(h) for h in hashes):
            problems.append(f"no sha256 hash: {requirement}")
    return problems


def pins(text: str) -> dict[str, Version]:
    """The version each `NAME==VERSION` entry pins, by canonical name."""
    found = {}
    for entry in entries(text):
        requirement = Requirement(re.split(r"\s+--hash=", entry)[0])
        for specifier in requirement.specifier:
            if specifier.operator == "==":
                found[canonicalize_name(requirement.name)] = Version(specifier.version)
    return found


def lock(name: str) -> str:
    return (LOCKS / name).read_text()


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("name", ["head.txt", "gpu-worker.txt"])
def test_the_locks_pin_every_package_exactly_with_hashes(name):
    text = lock(name)
    assert lock_problems(text) == [] and len(pins(text)) > 50
    assert set(SHARED) <= set(pins(text))
    a_hash = SHA256.search(text).group()
    for broken in (f"numpy>=1.24 --hash={a_hash}", "numpy==2.4.6", f"numpy==2.* --hash={a_hash}",
                   f"-e ./model --hash={a_hash}", f"torch @ https://example.org/torch.whl --hash={a_hash}",
                   "numpy==2.4.6 --hash=sha256:abc"):
        assert lock_problems(text + broken + "\n"), broken


def disagreements(head: dict[str, Version], worker: dict[str, Version]) -> list[str]:
    """Packages both nodes have in different versions, torch's CUDA build aside, and the SHARED ones either lacks."""
    missing = [f"{name}: missing" for name in SHARED if name not in head or name not in worker]
    return missing + [f"{name}: {head[name]} and {worker[name]}" for name in sorted(head.keys() & worker.keys())
                      if head[name] != worker[name] and not TORCH_CUDA_BUILD.fullmatch(name)]


def test_head_and_workers_run_the_same_versions_but_torchs_cuda_build():
    head, worker = pins(lock("head.txt")), pins(lock("gpu-worker.txt"))
    assert disagreements(head, worker) == []
    assert disagreements(head, {**worker, "optuna": Version("0.1")}) == [f"optuna: {head['optuna']} and 0.1"]
    assert disagreements(head, {**worker, "triton": Version("9.9"), "nvidia-nccl-cu12": Version("1")}) == []
    assert disagreements(head, {k: v for k, v in worker.items() if k != "optuna"}) == ["optuna: missing"]
    assert "boto3" in head  # MLflow's S3 artifact store, on the head only


def torch_problems(worker_in: dict[str, Version], worker: dict[str, Version]) -> list[str]:
    """The GPU workers' torch must be gpu-worker.in's, one the kernels' pinned versions have release wheels for, with
    the CUDA its lock brings among those wheels' (PyPI's torch: nvidia-cuda-runtime-cuNN)."""
    torch = worker.get("torch")
    if torch is None or torch != worker_in.get("torch"):
        return [f"torch {torch}, gpu-worker.in pins {worker_in.get('torch')}"]
    problems = [f"{name} {worker_in.get(name)}: release wheels known for {version} only"
                for name, version in RELEASE_WHEELS.items() if str(worker_in.get(name)) != version]
    minor = f"{torch.major}.{torch.minor}"
    cuda = {v.major for n, v in worker.items() if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", n)}
    if minor not in RELEASE_TORCH_CUDA:
        problems.append(f"torch {torch}: no release wheel of the kernels for torch {minor}")
    elif len(cuda) != 1 or not cuda <= RELEASE_TORCH_CUDA[minor]:
        problems.append(f"CUDA {sorted(cuda)}: the kernels' torch {minor} wheels are for CUDA {RELEASE_TORCH_CUDA[minor]}")
    return problems


def test_gpu_workers_pin_a_torch_with_the_kernels_release_wheels_and_the_head_keeps_its_own():
    head, worker, worker_in = pins(lock("head.txt")), pins(lock("gpu-worker.txt")), pins(lock("gpu-worker.in"))
    assert worker["torch"] == worker_in["torch"] == Version("2.10.0") != head["torch"]
    assert pins(lock("head.in"))["torch"] == head["torch"] == Version("2.13.0")  # the head and cpu image: unchanged
    assert torch_problems(worker_in, worker) == []
    assert worker["nvidia-cuda-runtime-cu12"].major == 12 and worker["triton"] == Version("3.6.0")  # PyPI's 2.10.0
    assert torch_problems(worker_in, {**worker, "torch": Version("2.13.0")}) == ["torch 2.13.0, gpu-worker.in pins 2.10.0"]
    newer = Version("2.13.0")
    assert torch_problems({**worker_in, "torch": newer}, {**worker, "torch": newer}) == \
        ["torch 2.13.0: no release wheel of the kernels for torch 2.13"]
    assert torch_problems({**worker_in, "mamba-ssm": Version("2.3.3")}, worker) == \
        ["mamba-ssm 2.3.3: release wheels known for 2.3.2.post1 only"]
    cuda11 = {k: v for k, v in worker.items() if k != "nvidia-cuda-runtime-cu12"} | {"nvidia-cuda-runtime-cu11": Version("11.8")}
    assert torch_problems(worker_in, cuda11) == ["CUDA [11]: the kernels' torch 2.10 wheels are for CUDA {12, 13}"]


def unsatisfied(requirements: list[str], locked: dict[str, Version]) -> list[str]:
    """The requirements (pyproject's specifiers, as they read now) that a lock does not meet on the nodes."""
    problems = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate(NODE):
            continue
        version = locked.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement} (locked: {version})")
    return problems


@pytest.mark.parametrize("name", ["head.txt", "gpu-worker.txt"])
def test_each_lock_meets_pyprojects_requirements(name):
    project = pyproject()
    locked = pins(lock(name))
    assert unsatisfied(project["project"]["dependencies"], locked) == []
    # the project installs with --no-deps --no-build-isolation on top: its build backend comes from the lock
    assert unsatisfied(project["build-system"]["requires"], locked) == []
    assert unsatisfied(["torch>=99"], locked) and unsatisfied(["not-locked-anywhere>=1"], locked)
    assert unsatisfied(["torch>=99; sys_platform == 'win32'"], locked) == []  # not for these nodes


def ray_problems(head_in: str, locks: dict[str, str], admitted: Requirement) -> list[str]:
    """pyproject admits a range of Rays, the cluster runs one: head.in must pin it exactly (so that `make lock`, even
    with --upgrade, takes no other), every lock must hold that one, and the range must admit it."""
    specifiers = [list(Requirement(entry).specifier) for entry in entries(head_in)
                  if canonicalize_name(Requirement(entry).name) == "ray"]
    if len(specifiers) != 1 or len(specifiers[0]) != 1 or specifiers[0][0].operator != "==":
        return ["head.in does not pin ray with =="]
    wanted = specifiers[0][0].version
    found = {name: re.search(r"^ray==(\S+)", text, re.M) for name, text in locks.items()}
    problems = [f"{name}: ray {match and match.group(1)}, head.in pins {wanted}" for name, match in found.items()
                if not match or match.group(1) != wanted]
    if not admitted.specifier.contains(wanted):
        problems.append(f"ray {wanted} is outside pyproject's {admitted}")
    return problems


def test_the_cluster_runs_the_one_ray_head_in_pins_inside_pyprojects_range():
    admitted = next(Requirement(line) for line in pyproject()["project"]["dependencies"]
                    if canonicalize_name(Requirement(line).name) == "ray")
    locks = {name: lock(name) for name in ("head.txt", "gpu-worker.txt", "cpu.txt")}
    assert ray_problems(lock("head.in"), locks, admitted) == []
    tested = pins(lock("head.in"))["ray"]  # 2.60.0 as shipped; docs/clusters.md says how to build for another
    assert ray_problems("ray[default,train,tune]==1.0.0\n", locks, Requirement("ray")) == \
        [f"{name}: ray {tested}, head.in pins 1.0.0" for name in locks]
    assert ray_problems("ray[default,train,tune]>=2.56\n", locks, admitted) == ["head.in does not pin ray with =="]
    assert ray_problems(lock("head.in"), locks, Requirement("ray<2")) == [f"ray {tested} is outside pyproject's ray<2"]


def test_the_kernel_versions_meet_the_cuda_extra():
    cuda = pyproject()["project"]["optional-dependencies"]["cuda"]
    wanted = pins(lock("gpu-worker.in"))  # the versions whose requirements gpu-worker.txt holds
    assert {canonicalize_name(Requirement(r).name) for r in cuda} <= set(wanted)
    assert unsatisfied(cuda, wanted) == []
    assert unsatisfied(cuda, {**wanted, "mamba-ssm": Version("1.2.0")})


def kernel_problems(text: str, wanted: dict[str, Version]) -> list[str]:
    """cuda-kernels.txt: nothing yet (saying what fills it), or the two wheels, hash-pinned, at gpu-worker.in's versions."""
    if not entries(text):
        return [] if "cuda-wheels.sh publish" in text else ["names no wheel, and does not say what writes them"]
    found = pins(text) if not lock_problems(text) else {}
    return lock_problems(text) + [f"{name}: {found.get(name)}, gpu-worker.in pins {version}"
                                  for name, version in wanted.items() if found.get(name, Version("0")).public != str(version)]


def test_the_cuda_kernels_are_pinned_wheels_or_nothing_yet():
    wanted = {name: version for name, version in pins(lock("gpu-worker.in")).items() if name in KERNELS}
    assert set(wanted) == set(KERNELS)
    assert kernel_problems(lock("cuda-kernels.txt"), wanted) == []
    a_hash = "--hash=sha256:" + "1" * 64
    good = f"mamba-ssm==2.3.2.post1+cu12torch2.10cxx11abiTRUE {a_hash}\ncausal-conv1d==1.7.0 {a_hash}\n"
    assert kernel_problems(good, wanted) == []
    assert kernel_problems(good.replace("1.7.0", "1.6.0"), wanted)
    assert kernel_problems(good.replace(a_hash, ""), wanted)
    assert kernel_problems("# to be written\n", wanted)


def pip_installs(commands: list[str]) -> list[str]:
    return [c for command in commands for c in re.split(r"&&|\|\||;", command) if re.search(r"\bpip3? install\b", c)]


def unlocked_installs(config: dict) -> list[str]:
    """pip installs in cluster.yaml that are not a lock with --require-hashes (head: head.txt, workers:
    gpu-worker.txt) or the project itself on top, --no-deps."""
    problems = []
    for lock_name, commands in (("head.txt", config["setup_commands"] + config["head_setup_commands"]),
                                ("gpu-worker.txt", config["setup_commands"] + config["worker_setup_commands"])):
        for install in pip_installs(commands):
            hashed = "--require-hashes" in install and f"-r ~/mamba-tune/cluster/locks/{lock_name}" in install
            project = re.search(r"--no-deps\b.*-e ~/mamba-tune\s*$", install)
            if not (hashed or project):
                problems.append(install.strip())
    return problems


def test_cluster_yaml_installs_the_locks_with_hashes(config):
    assert unlocked_installs(config) == []
    for commands in (config["head_setup_commands"], config["worker_setup_commands"]):
        assert sum("--require-hashes" in c and "--only-binary :all:" in c for c in pip_installs(commands)) == 1
    broken = {**config, "head_setup_commands": ['~/venv/bin/pip install -e "$HOME/mamba-tune" boto3'],
              "worker_setup_commands": ["~/venv/bin/pip install -q --require-hashes -r ~/mamba-tune/cluster/locks/head.txt",
                                        "~/venv/bin/pip install --no-build-isolation -e ~/mamba-tune[cuda]"]}
    assert len(unlocked_installs(broken)) == 3
    # the kernels: the script's one install, from the wheels folder only, hash-checked, nothing built
    assert "bash ~/mamba-tune/cluster/cuda-wheels.sh install" in config["worker_setup_commands"]
    script = pip_installs((ROOT / "cluster" / "cuda-wheels.sh").read_text().replace("\\\n", " ").splitlines())
    installs = [line for line in script if "--require-hashes" in line]
    assert len(installs) == 1 and all(f in installs[0] for f in ("--no-deps", "--only-binary :all:", "--no-index"))


# --- the kernels' script, run against fakes -----------------------------------------------------------------

@pytest.fixture
def kernels_home(tmp_path):
    """A copy of cluster/ (the script and the locks), a HOME whose ~/venv/bin/pip is this pip installing into an
    empty environment (as on a new worker), and a fake `aws` that logs what it is asked."""
    shutil.copytree(ROOT / "cluster", tmp_path / "cluster")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "empty"], check=True)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    for path, script in ((tmp_path / "venv" / "bin" / "pip", f'exec {sys.executable} -m pip --python {tmp_path}/empty/bin/python "$@"'),
                         (tmp_path / "bin" / "aws", f'echo "$@" >> {tmp_path}/aws.log')):
        path.write_text(f"#!/bin/sh\n{script}\n")
        path.chmod(0o755)
    return tmp_path


def kernels(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}  # none of this machine's pip settings
    env.update(HOME=str(home), PATH=f"{home}/bin:{env['PATH']}", PIP_CONFIG_FILE=os.devnull)
    return subprocess.run(["bash", str(home / "cluster" / "cuda-wheels.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_worker_without_its_kernel_wheels_stops_its_setup_and_builds_nothing(kernels_home):
    kernels_file = kernels_home / "cluster" / "locks" / "cuda-kernels.txt"
    kernels_file.write_text("# names no wheel yet\n")
    result = kernels(kernels_home, "install")
    assert result.returncode == 1 and "names no wheel yet" in result.stderr
    # named but not fetched: pip finds nothing in the wheels folder and may look nowhere else
    (kernels_home / "mamba-tune-wheels").mkdir()
    kernels_file.write_text(f"mamba-ssm==2.3.2.post1 --hash=sha256:{'1' * 64}\n")
    result = kernels(kernels_home, "install")
    assert result.returncode == 1 and "pip installed no wheel" in result.stderr
    assert "mamba-ssm" in result.stderr and "Building" not in result.stdout + result.stderr


def test_publishing_the_kernel_wheels_checks_them_and_writes_their_lock(kernels_home):
    locked = pins(lock("gpu-worker.txt"))
    wanted = {name: version for name, version in pins(lock("gpu-worker.in")).items() if name in KERNELS}
    torch = f"{locked['torch'].major}.{locked['torch'].minor}"
    cuda = next(v.major for n, v in locked.items() if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", n))
    mamba, conv = wanted["mamba-ssm"], wanted["causal-conv1d"]
    wheels = {"mamba": f"mamba_ssm-{mamba}+cu{cuda}torch{torch}cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
              "conv": f"causal_conv1d-{conv}-cp311-cp311-linux_x86_64.whl",
              "other cuda": f"causal_conv1d-{conv}+cu{cuda + 1}torch{torch}cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
              "other version": "causal_conv1d-1.0.0-cp311-cp311-linux_x86_64.whl",
              "cp310": f"causal_conv1d-{conv}-cp310-cp310-linux_x86_64.whl"}
    wheels = {kind: fake_wheel(kernels_home / name) for kind, name in wheels.items()}
    for bad in ("other cuda", "other version", "cp310"):
        result = kernels(kernels_home, "publish", "bucket", str(wheels["mamba"]), str(wheels[bad]))
        assert result.returncode == 1 and wheels[bad].stem in result.stderr, bad
    assert not (kernels_home / "aws.log").exists()  # nothing uploaded while one of them is wrong
    result = kernels(kernels_home, "publish", "bucket", str(wheels["mamba"]), str(wheels["conv"]))
    assert result.returncode == 0, result.stderr
    assert (kernels_home / "aws.log").read_text().count("s3://bucket/wheels/") == 2
    written = (kernels_home / "cluster" / "locks" / "cuda-kernels.txt").read_text()
    assert kernel_problems(written, wanted) == [] and len(entries(written)) == 2
    # and a worker installs exactly those, once the head has fetched them (here: copied) into the wheels folder
    (kernels_home / "mamba-tune-wheels").mkdir()
    for kind in ("mamba", "conv"):
        shutil.copy(wheels[kind], kernels_home / "mamba-tune-wheels")
    result = kernels(kernels_home, "install")
    assert result.returncode == 0, result.stderr
    assert len(list((kernels_home / "empty" / "lib").glob("python3*/site-packages/*.dist-info"))) == 2


def fake_wheel(path: Path) -> Path:
    """A wheel of that file name holding only its metadata: enough for pip to install."""
    name, version, tag = path.stem.split("-", 2)
    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"}
    with zipfile.ZipFile(path, "w") as wheel:
        for member, content in files.items():
            wheel.writestr(member, content)
        wheel.writestr(f"{info}/RECORD", "".join(f"{member},,\n" for member in [*files, f"{info}/RECORD"]))
    return path
