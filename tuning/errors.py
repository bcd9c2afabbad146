"""Errors the CLI reports as one line with exit code 2 (model/errors.py: InputError, their one base)."""

from model.errors import InputError


class UsageError(InputError):
    """Bad input from the user: `error: <what>, <rule>, <fix>`, exit code 2, no traceback."""
