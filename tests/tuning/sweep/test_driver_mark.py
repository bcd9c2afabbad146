"""driver.json: which process drives a sweep; a live mamba-tune process is running, anything else is not."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from tuning.sweep.driver_mark import driving, running_driver
from tuning.sweep_files import DRIVER


def mark(folder, pid: int, host: str | None = None) -> None:
    (folder / DRIVER).write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid, "since": "x"}))


def test_a_live_mamba_tune_process_drives_the_sweep_and_nothing_else_does(tmp_path):
    assert running_driver(tmp_path) is None  # no driver.json: none
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "tuning.cli"])  # named as ours
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # some other program
    try:
        mark(tmp_path, live.pid)
        assert running_driver(tmp_path) == f"pid {live.pid}"
        mark(tmp_path, other.pid)  # a process id reused by another program
        assert running_driver(tmp_path) is None
    finally:
        for process in (live, other):
            process.kill()
            process.wait()
    mark(tmp_path, live.pid)  # the driver was killed and left its file behind
    assert running_driver(tmp_path) is None
    mark(tmp_path, 4242, host="elsewhere")  # cannot be checked from here: taken at its word
    assert running_driver(tmp_path) == "pid 4242 on elsewhere"
    (tmp_path / DRIVER).write_text("{half a")
    assert running_driver(tmp_path) is None


def test_driving_removes_its_own_mark_and_never_a_driver_that_took_over(tmp_path):
    with driving(tmp_path):
        assert json.loads((tmp_path / DRIVER).read_text())["pid"] > 0
    assert not (tmp_path / DRIVER).exists()  # its own: removed
    with driving(tmp_path):
        mark(tmp_path, 4242, host="head-1")  # a `resume` elsewhere took the sweep over meanwhile
    assert running_driver(tmp_path) == "pid 4242 on head-1"  # its mark stays
