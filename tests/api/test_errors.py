"""The API raises where the CLI exits: bad input as the CLI's own error with its one line (nothing written), each
other exit code as its CommandError."""

from __future__ import annotations

import sys

import pytest

import mamba_tune
import mamba_tune.running
from mamba_tune.errors import error_for
from tuning.cli.main import main
from tuning.search.gate_verdict import NO_WINNER_EXIT


def _cli_error(capsys, words: list[str]) -> str:
    assert main(words) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err.removeprefix("error: ")


def test_bad_input_raises_the_clis_one_line_and_writes_nothing(tmp_path, capsys):
    missing, storage = tmp_path / "missing.parquet", tmp_path / "sweeps"
    line = _cli_error(capsys, ["sweep", "--data", str(missing), "--space", "smoke", "--storage", str(storage)])
    with pytest.raises(mamba_tune.UsageError) as raised:
        mamba_tune.sweep(missing, "smoke", storage=storage)
    assert str(raised.value) == line
    assert "no such file" in line
    assert list(tmp_path.iterdir()) == []


def test_a_set_value_is_not_repeated_in_the_error_as_the_cli_does_not(tmp_path, capsys):
    bars = tmp_path / "bars.parquet"
    line = _cli_error(capsys, ["sweep", "--data", str(bars), "--space", "smoke", "--set", "trials=hunter2secret"])
    with pytest.raises(mamba_tune.InputError) as raised:
        mamba_tune.sweep(bars, "smoke", set={"trials": "hunter2secret"})
    assert str(raised.value) == line
    assert "hunter2secret" not in line and "trials" in line
    assert list(tmp_path.iterdir()) == []


def test_an_argument_the_parser_refuses_is_the_same_input_error():
    with pytest.raises(mamba_tune.UsageError, match="--sampler bogus: not one of its choices"):
        mamba_tune.sweep("bars.parquet", "smoke", sampler="bogus")


def _command_exiting(monkeypatch, code: int, line: str) -> None:
    def run_command(args, argv):
        print("a report line")
        print(line, file=sys.stderr)
        return code

    monkeypatch.setattr(mamba_tune.running, "run_command", run_command)


@pytest.mark.parametrize(("code", "raised"), [(1, mamba_tune.CommandFailed), (130, mamba_tune.Interrupted),
                                              (NO_WINNER_EXIT, mamba_tune.NoWinner)])
def test_each_exit_code_raises_its_error_with_the_commands_error_line(monkeypatch, code, raised):
    _command_exiting(monkeypatch, code, "error: registering failed (refused); run it again")
    with pytest.raises(raised) as error:
        mamba_tune.best("smoke", quiet=True)
    assert error.value.exit_code == code
    assert str(error.value) == "registering failed (refused); run it again"
    assert isinstance(error.value, mamba_tune.CommandError)


def test_without_an_error_line_the_last_line_written_is_the_message(monkeypatch):
    _command_exiting(monkeypatch, 130, "interrupted; continue with `mamba-tune resume smoke`")
    with pytest.raises(mamba_tune.Interrupted, match="continue with `mamba-tune resume smoke`"):
        mamba_tune.best("smoke")


def test_a_sweep_that_failed_before_writing_anything_has_no_result(monkeypatch, tmp_path):
    _command_exiting(monkeypatch, 1, "error: tracking store http://x: not reachable")
    with pytest.raises(mamba_tune.CommandFailed) as error:
        mamba_tune.sweep(tmp_path / "bars.parquet", "smoke", storage=tmp_path / "sweeps", progress=False)
    assert error.value.result is None
    assert str(error.value) == "tracking store http://x: not reachable"


def test_ctrl_c_inside_a_command_is_interrupted_with_how_to_go_on(monkeypatch, tmp_path):
    def run_command(args, argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(mamba_tune.running, "run_command", run_command)
    with pytest.raises(mamba_tune.Interrupted, match="resume=True") as error:
        mamba_tune.train(tmp_path / "bars.parquet", out=tmp_path / "run")
    assert error.value.exit_code == 130


def test_quiet_keeps_the_report_lines_and_not_the_errors(monkeypatch, capsys):
    _command_exiting(monkeypatch, 1, "error: boom")
    with pytest.raises(mamba_tune.CommandFailed):
        mamba_tune.best("smoke", quiet=True)
    out, err = capsys.readouterr()
    assert "a report line" not in out and "error: boom" in err


def test_an_unknown_exit_code_is_a_failure_that_keeps_its_code():
    error = error_for(7, "odd")
    assert isinstance(error, mamba_tune.CommandFailed) and error.exit_code == 7
