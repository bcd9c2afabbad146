"""deploy/Dockerfile: its `cpu` and `cuda` images install through the make target the docs name (one way to a
locked environment, so the image and a hand install cannot drift apart), and that target installs the locks with
their hashes and nothing built. Docker is not needed: the Dockerfile is read, and the make target dry-run."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
MAKE_INSTALL = re.compile(r"\bmake\s+(install[\w-]*)")  # `make install-locked ...`


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions, (KEYWORD, arguments), continuation lines joined and comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [(word.upper(), rest.strip()) for word, _, rest in (line.strip().partition(" ") for line in joined.splitlines())
            if word]


def stages(text: str) -> dict[str, list[str]]:
    """Each build stage's RUN commands, by the stage's name (`FROM image AS name`)."""
    found: dict[str, list[str]] = {}
    current = None
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            current = rest.split()[-1] if " as " in rest.lower() else rest
            found[current] = []
        elif keyword == "RUN" and current is not None:
            found[current].append(rest)
    return found


def install_targets(text: str) -> set[str]:
    return set(MAKE_INSTALL.findall(text))


def documented_install(readme: str, docs: str) -> str:
    """Where the install is written down for people: the README when it names a `make install...`, else the
    Kubernetes page."""
    return readme if install_targets(readme) else docs


def dry_run(command: str) -> str:
    """What `make TARGET VARS` would run (make -n), from the repository root."""
    words = shlex.split(command)
    start = words.index("make")
    done = subprocess.run(["make", "-n", *words[start + 1:]], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


def test_dockerfile_installs_through_the_make_target_the_docs_name(dockerfile):
    docs = documented_install((ROOT / "README.md").read_text(), (ROOT / "docs" / "kubernetes.md").read_text())
    runs = [run for commands in stages(dockerfile).values() for run in commands]
    assert install_targets(" ".join(runs)) == install_targets(docs) == {"install-locked"}
    for run in runs:  # every pip the image runs goes through that target
        assert "pip install" not in run, run


def test_dockerfile_install_check_catches_a_target_renamed_on_one_side(dockerfile):
    docs = (ROOT / "docs" / "kubernetes.md").read_text()
    renamed = dockerfile.replace("make install-locked", "make install-frozen")
    assert install_targets(" ".join(stages(renamed)["cpu"])) != install_targets(docs)
    assert documented_install("no make here", docs) == docs
    assert documented_install("run `make install-frozen`", docs) == "run `make install-frozen`"


def test_dockerfile_cpu_and_cuda_images_install_their_locks_with_hashes(dockerfile):
    by_stage = stages(dockerfile)
    assert {"base", "cpu", "cuda"} <= set(by_stage)
    for stage, lock in (("cpu", "cluster/locks/head.txt"), ("cuda", "cluster/locks/gpu-worker.txt")):
        (install,) = [run for run in by_stage[stage] if install_targets(run)]
        commands = dry_run(install)
        assert f"pip install -q --require-hashes --only-binary :all: -r {lock}" in commands, commands
        assert "pip install -q --no-deps --no-build-isolation ." in commands  # the project, nothing beside the lock
        assert ("cuda-wheels.sh install" in commands) == (stage == "cuda")  # the kernels' wheels, on GPU images only
    assert (ROOT / "cluster" / "locks" / "cuda-kernels.txt").is_file()


def test_install_locked_refuses_kernels_outside_the_venv_their_script_uses(tmp_path):
    done = subprocess.run(["make", "install-locked", f"VENV={tmp_path / 'venv'}", "KERNELS=yes",
                           "LOCK=/dev/null", "-n"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "VENV must be ~/venv" in done.stdout  # the guard is in the recipe...
    guard = next(line for line in done.stdout.splitlines() if "VENV must be ~/venv" in line)
    ran = subprocess.run(["bash", "-c", guard], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "VENV must be ~/venv" in ran.stderr  # ...and stops a VENV elsewhere


def test_install_locked_installs_a_lock_as_cluster_yaml_does():
    """cluster.yaml spells the lock's pip install out (a node's setup runs before make can be counted on): the
    same flags as the make target's, so a `ray up` node and an image hold the same packages."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    for lock, commands in (("head.txt", config["head_setup_commands"]), ("gpu-worker.txt", config["worker_setup_commands"])):
        (spelt,) = [c for c in commands if f"locks/{lock}" in c and "pip install" in c]
        made = next(line for line in dry_run(f"make install-locked VENV=/V LOCK=cluster/locks/{lock}").splitlines()
                    if "--require-hashes" in line)
        assert spelt.replace("~/venv", "/V").replace("~/mamba-tune/", "") == made
