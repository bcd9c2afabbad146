"""SIGTERM stops `sweep` and `resume` as Ctrl-C (SIGINT) does, notifying or not: Ray Tune saves the sweep and ends
its trials, the command says how to continue it (`mamba-tune resume NAME`) and exits 130. SIGTERM is what `kill`,
`ray job stop` and Kubernetes send; left to its default, it would end the driver at once, between any two writes.

The SIGINT handler in place is called directly rather than SIGINT raised: a driver that `ray job submit` started
has SIGINT blocked (Ray blocks it in its processes, and the job's entrypoint inherits that), so a raised SIGINT
would wait, pending, until Ray's stop wait ran out and SIGKILL came (docs/cluster-aws.md, docs/kubernetes.md).
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


def stops_as_ctrl_c_on_sigterm(command: Callable[[Any], int]) -> Callable[[Any], int]:
    """`command` (a `main(args)`) run with SIGTERM handled as SIGINT (sigterm_as_ctrl_c)."""

    @functools.wraps(command)
    def run(args: Any) -> int:
        with sigterm_as_ctrl_c():
            return command(args)
    return run


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM handled as SIGINT inside: Ray Tune, while it runs, stops the sweep gracefully; elsewhere
    KeyboardInterrupt. Outside the main thread (where no handler can be set) signals stay as they are.
    `ray.init` puts a SIGTERM handler of its own in place (exit at once): handle_sigterm_as_ctrl_c after it."""
    try:
        saved = signal.signal(signal.SIGTERM, _as_ctrl_c)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


def handle_sigterm_as_ctrl_c() -> None:
    """SIGTERM handled as SIGINT again, over the handler `ray.init` set (in the main thread; elsewhere nothing)."""
    try:
        signal.signal(signal.SIGTERM, _as_ctrl_c)
    except ValueError:  # not the main thread
        pass


def _as_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """What SIGINT's handler does now (Ray Tune's: stop after saving; Python's: KeyboardInterrupt); a SIGINT that is
    ignored or left to the system still stops the command, with KeyboardInterrupt."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt
