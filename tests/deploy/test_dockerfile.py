"""deploy/Dockerfile: its `cpu` and `cuda` images install through the make target the docs name (one way to a
locked environment, so the image and a hand install cannot drift apart), in its two steps: the locked dependencies
in a layer before the source is copied, so a code change rebuilds one small layer. The target installs the locks
with their hashes and nothing built; the cpu image's lock holds PyTorch's CPU torch and no CUDA wheel, at the head's
versions. Docker is not needed: the Dockerfile is read, and the make target dry-run
(tests/deploy/test_image_install.py runs the cpu image's steps for real)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from tests.cluster.test_cluster_locks import entries, lock_problems, pins

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
MAKE_INSTALL = re.compile(r"\bmake\s+(install[\w-]*)")  # `make install-locked ...`
LOCKS = ROOT / "cluster" / "locks"
IMAGE_STEPS = ["install-locked-deps", "install-project"]  # what `make install-locked` runs, in turn
TORCH_CPU_PAGE = "https://download.pytorch.org/whl/cpu/torch/"  # the PyTorch CPU index's page of torch
CUDA_ONLY = re.compile(r"nvidia-.*|cuda-.*|triton")  # what PyPI's linux torch brings for CUDA


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


def stage_steps(text: str) -> dict[str, list[tuple[str, str]]]:
    """Each build stage's instructions, by name, those of the stage it starts FROM first (`FROM base AS cpu`:
    base's, then cpu's): what an image of that stage is built from, in order."""
    found: dict[str, list[tuple[str, str]]] = {}
    current = None
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            words = rest.split()
            current = words[-1] if " as " in rest.lower() else rest
            found[current] = list(found.get(words[0], []))
        elif current is not None:
            found[current].append((keyword, rest))
    return found


def copied(args: str) -> tuple[list[str], str]:
    """A COPY's sources and destination, its --flags (--chown, --from) dropped."""
    *sources, destination = [word for word in shlex.split(args) if not word.startswith("--")]
    return sources, destination


def make_steps(steps: list[tuple[str, str]]) -> list[str]:
    """The make targets a stage's RUNs install with, in order."""
    return [target for keyword, rest in steps if keyword == "RUN" for target in MAKE_INSTALL.findall(rest)]


def layer_problems(steps: list[tuple[str, str]]) -> list[str]:
    """What undoes the layer order in one image's steps: the dependencies' install must come before the source
    (`COPY . .`) with only the Makefile and cluster/ files copied ahead of it, and the project's install after."""
    if make_steps(steps) != IMAGE_STEPS:
        return [f"installs {make_steps(steps)}, not {IMAGE_STEPS}"]
    deps, project = [i for i, (keyword, rest) in enumerate(steps) if keyword == "RUN" and MAKE_INSTALL.search(rest)]
    context = [(i, copied(rest)[0]) for i, (keyword, rest) in enumerate(steps)  # the build context's, not --from's
               if keyword == "COPY" and "--from=" not in rest]
    early = [source for i, sources in context if i < deps for source in sources
             if not (source == "Makefile" or source.startswith("cluster/"))]
    between = [i for i, sources in context if "." in sources and deps < i < project]
    return ([f"copied before the dependencies' install: {early}"] if early else []) + \
        ([] if between else ["the source is not copied between the two installs"])


def install_targets(text: str) -> set[str]:
    return set(MAKE_INSTALL.findall(text))


def documented_install(readme: str, docs: str) -> str:
    """Where the locked install is written down for people: the README when it names a `make install-...`, else
    the Kubernetes page (`make install` alone is the checkout's own install, the one `make demo` makes)."""
    return readme if install_targets(readme) - {"install"} else docs


def dry_run(command: str) -> str:
    """What `make TARGET VARS` would run (make -n), from the repository root."""
    words = shlex.split(command)
    start = words.index("make")
    # --no-print-directory: under `make test` this make is a sub-make, which would add its "Entering directory" lines
    done = subprocess.run(["make", "--no-print-directory", "-n", *words[start + 1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=60,
                          check=True)
    return done.stdout


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


def make_variables(run: str) -> dict[str, str]:
    """The VAR=value words of a `make TARGET ...` command."""
    words = shlex.split(run)
    return dict(word.split("=", 1) for word in words[words.index("make") + 2:] if "=" in word)


def as_install_locked(runs: list[str]) -> str:
    """The one `make install-locked` that does what an image's make steps do: their variables together."""
    variables: dict[str, str] = {}
    for run in runs:
        variables |= make_variables(run)
    return shlex.join(["make", "install-locked", *(f"{name}={value}" for name, value in variables.items())])


def image_installs(text: str, stage: str) -> list[str]:
    """The RUNs of an image (its stage and those it starts from) that install through make."""
    return [rest for keyword, rest in stage_steps(text)[stage] if keyword == "RUN" and install_targets(rest)]


def test_dockerfile_installs_through_the_make_target_the_docs_name(dockerfile):
    docs = documented_install((ROOT / "README.md").read_text(), (ROOT / "docs" / "kubernetes.md").read_text())
    # the one target the docs give a machine of your own, and the image's two steps of it, named where they explain it
    assert "install-locked" in install_targets(docs) and install_targets(docs) <= {"install-locked", *IMAGE_STEPS}
    for stage in ("cpu", "cuda"):  # its two steps, apart, are exactly what the documented target runs
        runs = image_installs(dockerfile, stage)
        assert make_steps(stage_steps(dockerfile)[stage]) == IMAGE_STEPS
        assert "".join(map(dry_run, runs)) == dry_run(as_install_locked(runs)), stage
    for run in (run for commands in stages(dockerfile).values() for run in commands):  # no pip beside the target
        assert "pip install" not in run, run


def test_dockerfile_install_check_catches_a_step_left_out_or_renamed(dockerfile):
    deps, project = image_installs(dockerfile, "cpu")
    assert dry_run(deps) != dry_run(as_install_locked([deps]))  # the project's install left out
    assert dry_run(deps) + dry_run(project.replace("VENV=", "VENV=/elsewhere")) != \
        dry_run(as_install_locked([deps, project]))
    renamed = dockerfile.replace("make install-locked-deps", "make install-frozen-deps")
    assert make_steps(stage_steps(renamed)["cpu"]) != IMAGE_STEPS
    docs = (ROOT / "docs" / "kubernetes.md").read_text()
    assert documented_install("no make here", docs) == docs
    assert documented_install("run `make install-frozen`", docs) == "run `make install-frozen`"


def test_dockerfile_cpu_and_cuda_images_install_their_locks_with_hashes(dockerfile):
    by_stage = stages(dockerfile)
    assert {"base", "cpu", "cuda"} <= set(by_stage)
    for stage, lock in (("cpu", "cluster/locks/cpu.txt"), ("cuda", "cluster/locks/gpu-worker.txt")):
        commands = "".join(map(dry_run, image_installs(dockerfile, stage)))
        assert f"pip install -q --require-hashes --only-binary :all: -r {lock}" in commands, commands
        assert "pip install -q --no-deps --no-build-isolation .\n" in commands  # the project, non-editable
        assert ("cuda-wheels.sh install" in commands) == (stage == "cuda")  # the kernels' wheels, on GPU images only
    assert (ROOT / "cluster" / "locks" / "cuda-kernels.txt").is_file()


def test_dockerfile_installs_the_dependencies_before_it_copies_the_source(dockerfile):
    """A code change rebuilds the layers from the first COPY whose files changed: the locked dependencies
    (gigabytes) come from the lock and the Makefile alone, copied ahead, and the source comes after them."""
    for stage in ("cpu", "cuda"):
        assert layer_problems(stage_steps(dockerfile)[stage]) == [], stage
    source_first = dockerfile.replace("COPY --chown=ray Makefile ./", "COPY --chown=ray . .")
    assert layer_problems(stage_steps(source_first)["cpu"]) == ["copied before the dependencies' install: ['.']"]
    one_step = dockerfile.replace("make install-locked-deps", "make install-locked", 1)
    assert layer_problems(stage_steps(one_step)["cpu"])
    *_, deps, source, project = stage_steps(dockerfile)["cpu"]
    project_first = [*stage_steps(dockerfile)["cpu"][:-3], deps, project, source]  # the image would hold no code
    assert layer_problems(project_first) == ["the source is not copied between the two installs"]


def test_dockerfile_base_has_wget_for_kuberays_default_probes(dockerfile):
    """KubeRay 1.4 gives a Ray container with no probes of its own `wget ... | grep success` exec probes."""
    (apt,) = [run for run in stages(dockerfile)["base"] if "apt-get install" in run]
    assert "wget" in shlex.split(apt.partition("apt-get install")[2].partition("&&")[0])


def test_dockerfile_cuda_image_has_a_c_compiler_for_tritons_launcher(dockerfile):
    """Triton compiles a C launcher at a kernel's first launch: the cuda image needs gcc and the C library's headers
    (libc6-dev, which --no-install-recommends leaves out of gcc's install); the cpu image needs neither."""
    def apt_packages(text: str, stage: str) -> set[str]:
        return {word for run in stages(text)[stage] if "apt-get install" in run
                for word in shlex.split(run.partition("apt-get install")[2].partition("&&")[0])
                if not word.startswith("-")}
    assert {"gcc", "libc6-dev"} <= apt_packages(dockerfile, "cuda")
    assert not {"gcc", "libc6-dev"} & (apt_packages(dockerfile, "base") | apt_packages(dockerfile, "cpu"))
    header = dockerfile.partition("\nFROM ")[0]
    assert "Triton" in header and "libc6-dev" in header and "launcher" in header  # the header says why
    # first in the cuda stage, as root (the packages), and the image's user back before anything else
    base = len(stage_steps(dockerfile)["base"])
    (user, root), (run, apt), (back, ray) = stage_steps(dockerfile)["cuda"][base:base + 3]
    assert (user, root, run, back, ray) == ("USER", "root", "RUN", "USER", "ray") and "libc6-dev" in apt
    without = dockerfile.replace(" gcc libc6-dev", " gcc")
    assert "libc6-dev" not in apt_packages(without, "cuda")


def test_cpu_lock_is_the_heads_with_pytorchs_cpu_torch_and_no_cuda_wheels():
    """cluster/locks/cpu.txt (the cpu image): every package pinned with hashes, at head.txt's version where both
    have it, torch PyTorch's CPU build (found through the lock's first line, PyTorch's page of it), nothing of CUDA."""
    text = (LOCKS / "cpu.txt").read_text()
    options = [entry for entry in entries(text) if entry.startswith("--")]
    assert options == [f"--find-links {TORCH_CPU_PAGE}"] and text.startswith(options[0])
    packages = text.replace(options[0], "")
    assert lock_problems(packages) == []
    cpu, head = pins(packages), pins((LOCKS / "head.txt").read_text())
    assert cpu["torch"] == Version("2.13.0+cpu") and cpu["torch"].public == str(head["torch"])
    assert [name for name in cpu if CUDA_ONLY.fullmatch(name)] == [] < [name for name in head if CUDA_ONLY.fullmatch(name)]
    assert {name: (head[name], cpu[name]) for name in cpu.keys() & head.keys() - {"torch"} if cpu[name] != head[name]} == {}
    assert set(cpu) == set(head) - {name for name in head if CUDA_ONLY.fullmatch(name)}  # the head's, less CUDA's


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
