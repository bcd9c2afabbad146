"""Every subcommand's help: a one-line summary for `mamba-tune --help`, a description and examples for its own."""

from __future__ import annotations

import argparse
import textwrap

WIDTH = 100  # the description's lines


def subcommand(commands: argparse._SubParsersAction, name: str, summary: str, examples: tuple[str, ...],
                description: str | None = None,
                exit_codes: tuple[tuple[int, str], ...] = ()) -> argparse.ArgumentParser:
    """A subcommand `name`: `summary` in the list of commands; `description` (default: the summary), the
    examples and (where given) what each exit code means in its own --help."""
    epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)
    if exit_codes:
        epilog += "\n\nexit codes:\n" + "\n".join(
            textwrap.fill(meaning, WIDTH, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
            for code, meaning in exit_codes)
    return commands.add_parser(
        name, help=summary, description=textwrap.fill(description or f"{summary[0].upper()}{summary[1:]}.", WIDTH),
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
