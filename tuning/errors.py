"""Errors the CLI reports as one line with exit code 2."""


class UsageError(Exception):
    """Bad input from the user: `error: <what>, <rule>, <fix>`, exit code 2, no traceback."""
