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


@pytest.fixture(scope="session")
def finished_sweep(bars, tmp_path_factory):
    """The 5-trial sweep of tests.tuning.sweeps.SPACE, one trial at a time, run once per session into an embedded
    MLflow store.

    -> (folder, storage, tracking_uri, completed process)
    """
    from tests.tuning.sweeps import run, write_space

    folder = tmp_path_factory.mktemp("sweep")
    storage, uri = folder / "sweeps", f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}"
    # One trial at a time: ASHA's decisions depend on the order trials reach a rung, and this order is then fixed.
    space = write_space(folder, resources={"max_concurrent": 1})
    done = run("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, storage, uri, done
