"""Every `mamba-tune` command the README shows exists, with the flags it shows (parsed, not run: the faults tier's
tests/tuning/cli/test_readme_blocks.py runs the README's two blocks as written)."""

from __future__ import annotations

import pytest

from tests.readme_commands import block_commands, every_command
from tuning.cli.main import build_parser


def test_the_readme_shows_its_four_commands_from_a_csv_to_a_verdict():
    commands = block_commands("### Your own bars")
    assert [c[:2] for c in commands] == [["data", "import"], ["data", "check"], ["sweep", "--data"], ["best", "smoke"]]


@pytest.mark.parametrize("command", every_command(), ids=" ".join)
def test_every_command_the_readme_shows_parses(command, capsys):
    try:
        build_parser().parse_args(command)
    except SystemExit as exc:  # argparse's refusal, or --help/--version (which the README does not show)
        pytest.fail(f"`mamba-tune {' '.join(command)}` does not parse: {capsys.readouterr().err.strip()} ({exc.code})")
