"""Which process drives a sweep now: <sweep folder>/driver.json, there while `sweep` or `resume` runs.

`mamba-tune list` reads it to tell a running sweep from an interrupted one: the file names the
driver's host and process id; a driver killed outright leaves it behind, and a process id that is
no longer a live mamba-tune process on this host says the sweep is not running after all.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from model.atomic import write_text_atomic
from tuning.sweep_files import DRIVER


@contextmanager
def driving(folder: Path) -> Iterator[None]:
    """Mark `folder`'s sweep as driven by this process until the block ends (however it ends); the mark is removed
    only while it is still this process's: a driver that took over meanwhile keeps its own."""
    mark = {"host": socket.gethostname(), "pid": os.getpid(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_text_atomic(folder / DRIVER, json.dumps(mark))
    try:
        yield
    finally:
        if _mark_of(folder) == (mark["host"], mark["pid"]):
            (folder / DRIVER).unlink(missing_ok=True)


def _mark_of(folder: Path) -> tuple[str, int] | None:
    """(host, pid) of `folder`'s driver mark; None where there is none, or none that reads."""
    try:
        mark = json.loads((folder / DRIVER).read_text())
        return str(mark["host"]), int(mark["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_driver(folder: Path) -> str | None:
    """"pid N" (or "pid N on HOST" for another host) of the process driving the sweep now; None when none is."""
    if (mark := _mark_of(folder)) is None:
        return None
    host, pid = mark
    if host != socket.gethostname():
        return f"pid {pid} on {host}"  # cannot be checked from here: taken at its word
    return f"pid {pid}" if _alive(pid) else None


def _alive(pid: int) -> bool:
    """Whether `pid` is a live mamba-tune process (a process id reused by another program is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:  # no /proc (macOS): the process id alone
        return True
    return b"mamba-tune" in command or b"tuning.cli" in command
