"""The `mamba-tune` commands the README shows, read from its text: the tests run them as written, so that the page
and the tool cannot drift."""

from __future__ import annotations

import re
import shlex

from tests.cli import ROOT

PROGRAM = ".venv/bin/mamba-tune"


def readme() -> str:
    return ROOT.joinpath("README.md").read_text()


def block_commands(heading: str) -> list[list[str]]:
    """The command lines of the first ```bash block under `heading` (a line of the README, e.g. "## What a sweep
    does"), as argument lists after the program; comments dropped, continued lines (a trailing backslash) joined."""
    section = readme().split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line, comments=True)[1:] for line in _lines(block) if line.startswith(f"{PROGRAM} ")]


def every_command() -> list[list[str]]:
    """Every `mamba-tune ...` the README shows: each line of its bash blocks that runs the program, and each inline
    code span that starts with it; as argument lists after the program."""
    text = readme()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        found += [shlex.split(line, comments=True)[1:] for line in _lines(block) if line.startswith(f"{PROGRAM} ")]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`\n]+)`", prose):
        words = span.split()
        if words and words[0] in (PROGRAM, "mamba-tune") and len(words) > 1:
            found.append(shlex.split(span)[1:])
    return found


def _lines(block: str) -> list[str]:
    """The block's lines with continuations joined, each stripped of its trailing comment's leading blanks."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines()]
