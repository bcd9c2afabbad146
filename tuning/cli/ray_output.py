"""Ray's own lines kept out of the sweep's progress: they go to a log file in the sweep's folder.

Ray's driver prints what its raylet and workers say ("(raylet) WARNING: 8 PYTHON worker processes
have been started ...", "(RayTrainWorker pid=123) ..."), coloured, on this process's stdout and
stderr, and its Python loggers write there too. While a sweep runs, `ray_output_to(path)` sends
those to `path` without their colour codes; everything else (the progress lines) goes on as before.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Ray's prefix of a line from another process: (raylet), (autoscaler +1m2s), (pid=12), (Actor pid=12, ip=...)
RAY_PREFIX = re.compile(r"\((raylet|autoscaler|pid=\d+|[\w.<>-]+ pid=\d+)[^)]*\) ")


def is_ray_line(text: str) -> bool:
    """Whether `text` (one print's worth) is a line Ray relays from its raylet or workers."""
    return RAY_PREFIX.match(ANSI.sub("", text)) is not None


class RayLineSplitter(io.TextIOBase):
    """A text stream that writes Ray's relayed lines to `log` (colour codes removed) and the rest to `stream`.

    `print` writes its text and then its end ("\\n") in two calls: an end follows the text it ends.
    """

    def __init__(self, stream: TextIO, log: TextIO) -> None:
        super().__init__()
        self.stream, self.log = stream, log
        self._last: TextIO = stream
        self._lock = threading.Lock()  # Ray prints from a thread of its own

    def write(self, text: str) -> int:
        with self._lock:
            target = self._last if text in ("\n", "") else self.log if is_ray_line(text) else self.stream
            if self.log.closed:  # a late line, after the sweep: the terminal rather than nowhere
                target = self.stream
            self._last = target
            target.write(ANSI.sub("", text) if target is self.log else text)
            if target is self.log:
                self.log.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self.stream.flush()
            if not self.log.closed:
                self.log.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None)

    def __getattr__(self, name: str) -> object:  # the rest (buffer, ...) is the stream's own
        return getattr(self.stream, name)


@contextmanager
def ray_output_to(path: Path) -> Iterator[None]:
    """Until the block ends: Ray's relayed lines and its loggers' records go to `path` (appended)."""
    ray_logger = logging.getLogger("ray")
    saved_streams, saved_handlers = (sys.stdout, sys.stderr), list(ray_logger.handlers)
    with open(path, "a", encoding="utf-8") as log:
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        sys.stdout, sys.stderr = RayLineSplitter(sys.stdout, log), RayLineSplitter(sys.stderr, log)
        ray_logger.handlers = [handler]
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved_streams
            ray_logger.handlers = saved_handlers
