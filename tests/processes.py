"""The processes a test started, from /proc: a process and everything below it, and waiting for them to end; a
server's process started for a test, its health awaited, stopped at the end."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants, parents first (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):  # gone already
            pass
    tree, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        tree.append(pid)
        queue.extend(children.get(pid, []))
    return tree


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until none of `pids` is alive (zombies count as gone); -> those still alive when time ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def serving(server):
    """Yield the server started, and stop it at the end, even when its start or the test fails (a fixture's body:
    `yield from serving(Server(...))`)."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


def wait_until_healthy(process, url: str, timeout_s: float, log: Callable[[], str]) -> None:
    """Until `url` (a server's /health) answers; AssertionError, with the server's `log()`, when the process exits
    first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited: {log()}"
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the server did not answer {url} within {timeout_s} s: {log()}")
