"""The command line a user meets: --version, and every command's --help with a description, examples and a help
line for every flag."""

from __future__ import annotations

import argparse
from importlib.metadata import version

import pytest

from tests.cli import run_cli
from tuning.cli.main import build_parser


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every subcommand's parser, with the words that reach it (("data", "check"), ...)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [((*path, name), sub), *commands(sub, (*path, name))]
    return found


COMMANDS = commands(build_parser())


def test_every_command_is_reachable_from_the_top():
    assert {" ".join(words) for words, _ in COMMANDS} == {
        "model", "data", "data synth", "data sp500", "data nasdaq", "data import", "data check", "train", "sweep", "resume", "best",
        "promote", "ui", "doctor", "list", "space", "space keys", "space show"}


@pytest.mark.parametrize(("words", "parser"), COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_every_command_has_a_description_examples_and_help_for_every_flag(words, parser):
    assert parser.description and parser.description[0].isupper() and parser.description.rstrip().endswith(".")
    examples, *codes = parser.epilog.split("\n\n")  # then, for sweep and resume, what each exit code means
    examples = examples.splitlines()
    assert examples[0] == "examples:" and all(line.startswith(f"  mamba-tune {' '.join(words)}")
                                               for line in examples[1:]), examples
    assert all(section.startswith("exit codes:\n  0    ") for section in codes), codes
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert action.help and action.help != argparse.SUPPRESS, (words, action.option_strings or action.dest)


def test_version_and_help_as_a_user_runs_them():
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"mamba-tune {version('mamba-tune')}"
    helped = run_cli("sweep", "--help")
    assert helped.returncode == 0 and "--precision {fp32,bf16}" in helped.stdout and "examples:\n  mamba-tune sweep" \
        in helped.stdout
