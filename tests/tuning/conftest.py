"""Helpers for driving `mamba-tune` as a user does: a real process, its exit code and output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def run_cli():
    """run_cli(*args, cwd=None) -> CompletedProcess of `python -m tuning.cli ARGS`."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env_path = str(ROOT)
        return subprocess.run([sys.executable, "-m", "tuning.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=600, cwd=cwd, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})

    return run


def assert_one_line_error(done: subprocess.CompletedProcess, starts: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"error: {starts}"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
