"""Run a command as `mamba-tune` runs it (tuning/cli/main.py: parse_command, run_command), from an API call.

Bad input is raised as the CLI's InputError; a non-zero exit code becomes a CommandError whose message is the last
error line the command wrote (its stderr still shows, as the CLI's does). `quiet` keeps the command's report lines
(stdout) from showing; they are the CLI's, the result holds the same figures.
"""

from __future__ import annotations

import contextlib
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TextIO

from mamba_tune.argv import argv_for
from mamba_tune.errors import Interrupted, error_for
from tuning.cli.main import parse_command, run_command


@dataclass(frozen=True)
class Ran:
    """A command that ran: its parsed arguments, its exit code, and its last error line ("" when none)."""

    args: Any
    code: int
    error: str


def run(command: tuple[str, ...], keywords: Mapping[str, Any], quiet: bool = False,
        around: Callable[[Any], AbstractContextManager[Any]] | None = None) -> Ran:
    """Parse and run `command` with `keywords` (mamba_tune/argv.py), inside `around(args)` where given (a sweep's
    progress). Raises InputError for bad input (nothing written), Interrupted for Ctrl-C that reached here; another
    exit code is returned, for the caller to read what the command left before it raises (raise_for)."""
    argv = argv_for(command, keywords)
    args = parse_command(argv)
    tail = _Tail(sys.stderr)
    inside = around(args) if around is not None else contextlib.nullcontext()
    with contextlib.redirect_stderr(tail), _quiet(quiet), inside:
        try:
            code = run_command(args, argv)
        except KeyboardInterrupt:
            raise Interrupted("interrupted" + (f"; continue with {hint}" if (hint := _hint(args)) else "")) from None
    return Ran(args, code, tail.last_error())


def raise_for(ran: Ran, result: Any = None) -> None:
    """The CommandError for a command that did not exit 0, carrying `result` (what it left, read back)."""
    if ran.code != 0:
        raise error_for(ran.code, ran.error or f"mamba-tune {ran.args.command} exited with code {ran.code}", result)


def _hint(args: Any) -> str | None:
    return f"train(..., out={str(args.out)!r}, resume=True)" if args.command == "train" else None


@contextlib.contextmanager
def _quiet(quiet: bool) -> Iterator[None]:
    if not quiet:
        yield
        return
    with contextlib.redirect_stdout(_Discard(sys.stdout)):
        yield


class _Stream:
    """A text stream standing in for `stream` (sys.stdout or sys.stderr): what it does with a write is its
    subclass's; the rest (isatty, fileno, encoding...) is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _Discard(_Stream):
    def write(self, text: str) -> int:
        return len(text)


class _Tail(_Stream):
    """stderr, written through, its last lines kept: the command's error line is the message of what is raised."""

    def __init__(self, stream: TextIO, keep: int = 50) -> None:
        super().__init__(stream)
        self.lines: deque[str] = deque(maxlen=keep)
        self.partial = ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        *done, self.partial = (self.partial + text).split("\n")
        self.lines.extend(line.rstrip("\r") for line in done if line.strip())
        return len(text)

    def last_error(self) -> str:
        """The last line that says `error:` (without it), else the last line written, else ""."""
        lines = [*self.lines, *([self.partial] if self.partial.strip() else [])]
        errors = [line for line in lines if line.startswith("error: ")]
        if errors:
            return errors[-1].removeprefix("error: ")
        return lines[-1] if lines else ""


