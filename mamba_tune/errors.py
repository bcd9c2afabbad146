"""What the API raises where the CLI would exit with a code other than 0.

Bad input is the project's own InputError (model/errors.py; tuning/errors.py: UsageError, a subclass), raised with
the one line the CLI prints after `error: ` (exit 2), before anything is written. A command that ran and did not
succeed raises a CommandError, one subclass per exit code, its message the command's last error line.
"""

from __future__ import annotations

from typing import Any

from model.errors import InputError
from tuning.errors import UsageError
from tuning.search.gate_verdict import NO_WINNER_EXIT

__all__ = ["InputError", "UsageError", "CommandError", "CommandFailed", "Interrupted", "NoWinner"]


class CommandError(Exception):
    """A command that ran and did not succeed: `exit_code` is the CLI's, the message its last error line."""

    exit_code: int = 1

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result  # what the command left, read back (a SweepResult for a sweep), or None


class CommandFailed(CommandError):
    """Exit code 1: the command failed (a trial's or the tracking store's error, a look that could not be taken);
    its message says why and how to go on."""

    exit_code = 1


class Interrupted(CommandError):
    """Exit code 130: Ctrl-C or SIGTERM stopped the command; what it finished is kept (`resume` continues a sweep,
    `train(..., resume=True)` a run)."""

    exit_code = 130


class NoWinner(CommandError):
    """The sweep's own exit code for an answer, not a failure: no configuration beat HAR at the gate's epoch. Its
    records and MLflow runs are complete; `result` is the SweepResult (its leaderboard, `winner` None), the message the
    answer and the advice the CLI prints."""

    exit_code = NO_WINNER_EXIT  # the CLI's (tuning/search/gate_verdict.py)


def error_for(code: int, message: str, result: Any = None) -> CommandError:
    """The CommandError for exit code `code` (not 0, not 2): Interrupted for 130, NoWinner for the sweep's no-winner
    code, CommandFailed for any other."""
    if code == Interrupted.exit_code:
        return Interrupted(message, result)
    if code == NoWinner.exit_code:
        return NoWinner(message, result)
    failed = CommandFailed(message, result)
    failed.exit_code = code
    return failed
