"""Every error a user can fix has one base, which the CLI turns into one line and exit code 2."""

from __future__ import annotations

import pytest

from model.backend import BackendUnavailable
from model.bars import DataError
from model.checkpoint import CheckpointError
from model.errors import InputError
from model.training import ResumeMismatch
from tuning.cli import main as cli
from tuning.errors import UsageError
from tuning.search.resources import ResourceError
from tuning.yaml_io import ConfigError


@pytest.mark.parametrize("kind", [BackendUnavailable, DataError, CheckpointError, ResumeMismatch, UsageError,
                                  ResourceError, ConfigError])
def test_input_error_is_the_base_of_every_error_a_user_can_fix(kind):
    assert issubclass(kind, InputError)


def test_input_error_from_any_command_is_one_line_and_exit_2(monkeypatch, capsys):
    class Refused(InputError):
        pass

    def refuse(args):
        raise Refused("bars.parquet: no rows, a file needs bars; pass another file")

    monkeypatch.setattr(cli, "cmd_model", refuse)  # `mamba-tune model` now raises it
    assert cli.main(["model"]) == 2
    assert capsys.readouterr().err == "error: bars.parquet: no rows, a file needs bars; pass another file\n"
