"""`mamba-tune` as a user runs it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import pytest

from tests.cli import assert_one_line_error, run_cli


def test_cli_model_summarises_the_default_forecaster():
    done = run_cli("model")
    assert done.returncode == 0, done.stderr
    assert "4 Mamba-2 layers, d_model 128, d_inner 256, 8 heads x 32, d_state 64" in done.stdout
    assert "backend here: torch" in done.stdout


def test_cli_model_applies_overrides():
    done = run_cli("model", "--set", "d_model=64", "--set", "n_layers=2")
    assert done.returncode == 0, done.stderr
    assert "2 Mamba-2 layers, d_model 64, d_inner 128, 4 heads x 32" in done.stdout


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["model", "--set", "headdim=48"], "error: model setting: headdim must divide expand*d_model, got headdim=48"),
        (["model", "--set", "d_modle=64"], "error: model setting: unknown model setting 'd_modle'; allowed: n_features"),
        (["model", "--set", "d_model"], "error: --set 'd_model' is not KEY=VALUE, e.g. --set d_model=64"),
        (["model", "--set", "dt_limit=[0, "], "error: --set 'dt_limit=[0, ': the value is not valid YAML"),
        (["model", "--set", "A_init_range=3"], "error: model setting:"),
        (["frobnicate"], "error: argument command: invalid choice: 'frobnicate'"),
        (["model", "--set", "backend=mamba_ssm"], "error: backend 'mamba_ssm' cannot run: importing mamba_ssm"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args, match):
    assert_one_line_error(run_cli(*args), match.removeprefix("error: "))
