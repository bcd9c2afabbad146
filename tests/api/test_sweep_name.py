"""The API reads a sweep back under the name the command settled (after --set, --name), not one it works out again."""

from __future__ import annotations

import pytest

import mamba_tune
from mamba_tune import commands, running
from mamba_tune.argv import argv_for
from mamba_tune.commands import settled_name
from tuning.cli import sweep as cli_sweep


class _Settled(Exception):
    """Raised where cmd_sweep has settled the name, before it reads the bars (no Ray, nothing written)."""


@pytest.fixture
def stopped_once_named(monkeypatch):
    """sweep() run up to its name, then counted as exit 0; the (storage, name) it would read back, returned."""

    def stop(path):
        raise _Settled

    def run_command(args, argv):
        try:
            return cli_sweep.cmd_sweep(args)
        except _Settled:
            return 0

    monkeypatch.setattr(cli_sweep, "require_bars_file", stop)
    monkeypatch.setattr(running, "run_command", run_command)
    monkeypatch.setattr(commands, "read_sweep", lambda storage, name: (storage, name))


@pytest.mark.parametrize(("keywords", "name"), [({"set": {"name": "foo"}}, "foo"), ({}, "smoke"),
                                                 ({"set": {"name": "foo"}, "name": "bar"}, "bar")])
def test_sweep_reads_back_the_name_the_command_settled(stopped_once_named, tmp_path, keywords, name):
    storage, read = mamba_tune.sweep(tmp_path / "bars.parquet", "smoke", storage=tmp_path, progress=False, quiet=True,
                                     **keywords)
    assert read == name


def test_resume_settles_the_name_given_and_a_sweep_refused_early_none():
    resumed = running.parse_command(argv_for(("resume",), {"name": "kept"}))
    refused = running.parse_command(argv_for(("sweep",), {"data": "bars.parquet", "space": "smoke"}))
    assert (settled_name(resumed), settled_name(refused)) == ("kept", None)
