"""The wheel as users install it: built from the checkout's files (those git keeps, as `pip install git+...` and the
image's `COPY . .` see them), installed non-editable with --no-deps into a fresh venv outside the checkout.

The fresh venv takes its dependencies from the test venv through one .pth line naming the test venv's site-packages.
A folder named in a .pth goes on sys.path after the venv's own site-packages, and the .pth files inside it are not
read: the editable install's finder (__editable__.mamba_tune-*.pth) never runs, so mamba-tune's own code can come
from the wheel alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def checkout_files() -> list[str]:
    """The checkout's files as git keeps them (tracked, and new ones not ignored), relative to ROOT."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout
    return sorted(name for name in set(listed.split("\0")) if name and (ROOT / name).is_file())


def build_wheel(folder: Path) -> Path:
    """The wheel of a copy of the checkout's files (never of ROOT itself: setuptools' build/ there could hold
    modules long deleted); -> the .whl."""
    source = folder / "source"
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    # an absolute path and --no-index: pip would fetch a bare name like `source` from an index
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "--no-build-isolation",
         "-w", folder / "dist", source.resolve())
    (wheel,) = (folder / "dist").glob("mamba_tune-*.whl")
    return wheel


@dataclass(frozen=True)
class FreshEnv:
    """A venv with the wheel installed and the test venv's site-packages for the dependencies."""

    root: Path
    site_packages: Path

    def run(self, *args: object, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a program of the venv's bin (mamba-tune, python) with ARGS in `cwd`, as its user would."""
        program, *rest = map(str, args)
        return subprocess.run([str(self.root / "bin" / program), *rest], cwd=cwd, env=self.environment(),
                              capture_output=True, text=True, timeout=timeout)

    def environment(self) -> dict[str, str]:
        """This process's environment (its MLflow store among it) without anything that puts the checkout on
        sys.path, the venv's bin first on PATH."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        return {**env, "VIRTUAL_ENV": str(self.root), "PATH": f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def fresh_env(folder: Path, wheel: Path) -> FreshEnv:
    """A new venv in `folder` off the base interpreter, the test venv's site-packages for dependencies, and
    `wheel` installed in it non-editable, --no-deps."""
    _run(sys.executable, "-m", "venv", "--without-pip", folder)  # venv starts from sys._base_executable
    python = folder / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    dependencies = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "test-venv-dependencies.pth").write_text("".join(f"{path}\n" for path in dependencies))
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", "--no-deps", wheel)
    return FreshEnv(folder, site)


def _run(*args: object) -> str:
    done = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout
