"""The command a sweep prints to browse its Optuna study works as printed: optuna-dashboard is installed with
mamba-tune, and serves the study on this machine."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.cli import free_port

pytestmark = pytest.mark.integration


def test_the_printed_optuna_dashboard_command_serves_the_sweeps_study(finished_sweep):
    _, storage, _, done = finished_sweep
    printed = re.search(r"\(browse: (optuna-dashboard [^)]+)\)", done.stdout).group(1)
    command = shlex.split(printed)
    assert command[1] == f"sqlite:///{storage / 't' / 'optuna.db'}"
    port = free_port()
    executable = Path(sys.executable).parent / command[0]  # as `make demo` installs it, beside mamba-tune
    server = subprocess.Popen([str(executable), *command[1:], "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline, studies = time.monotonic() + 60, None
        while studies is None and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as answer:
                    studies = json.loads(answer.read())["study_summaries"]
            except OSError:
                time.sleep(0.5)
        assert studies is not None, server.stderr.read() if server.poll() is not None else "no answer in 60 s"
        assert [s["study_name"] for s in studies] == ["t"]
    finally:
        server.kill()
        server.wait()
