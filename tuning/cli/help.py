"""Every subcommand's help: a one-line summary for `mamba-tune --help`, a description and examples for its own."""

from __future__ import annotations

import argparse
import textwrap

WIDTH = 100  # the description's lines


def subcommand(commands: argparse._SubParsersAction, name: str, summary: str, examples: tuple[str, ...],
                description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand `name`: `summary` in the list of commands; `description` (default: the summary) and the
    examples in its own --help."""
    return commands.add_parser(
        name, help=summary, description=textwrap.fill(description or f"{summary[0].upper()}{summary[1:]}.", WIDTH),
        epilog="examples:\n" + "\n".join(f"  {example}" for example in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter)
