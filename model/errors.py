"""The one base of every error that `mamba-tune` reports as `error: <what>, <rule>, <fix>` with exit code 2.

Raise a subclass for input a user can fix (a data file, a configuration, a flag, a checkpoint,
a cluster that cannot hold the request); the CLI catches `InputError` alone. Subclasses keep
their Python base (ValueError, RuntimeError) too, so library callers can catch either.
"""


class InputError(Exception):
    """Bad input from the user: one line saying what, the rule, and the fix; exit code 2, no traceback."""
