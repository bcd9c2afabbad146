"""Driving `mamba-tune` as a user does: a real process, in one environment, its exit code and output."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_command(*args: object) -> list[str]:
    """The command line of `mamba-tune ARGS` with this checkout's code."""
    return [sys.executable, "-m", "tuning.cli", *map(str, args)]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment every `mamba-tune` a test starts runs in: the test session's own (its MLflow store,
    tests/conftest.py), with this checkout importable, and `extra` on top."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def run_cli(*args: object, cwd: Path = ROOT, timeout: int = 900, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """Run `mamba-tune ARGS` to its end; -> the finished process with its output."""
    return subprocess.run(cli_command(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env or cli_env())


def assert_one_line_error(done: subprocess.CompletedProcess, starts: str) -> None:
    """Bad input: exit 2, one line `error: ...` on stderr, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"error: {starts}"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def free_port() -> int:
    """A localhost TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
