"""`mamba-tune` as a user runs it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import re

import pytest

from tests.cli import assert_one_line_error, run_cli


def test_cli_model_summarises_the_default_forecaster():
    done = run_cli("model")
    assert done.returncode == 0, done.stderr
    assert "4 Mamba-2 layers, d_model 128, d_inner 256, 8 heads x 32, d_state 64" in done.stdout
    assert "backend here: torch" in done.stdout


def test_cli_model_applies_overrides():
    done = run_cli("model", "--set", "model.d_model=64", "--set", "model.n_layers=2")
    assert done.returncode == 0, done.stderr
    assert "2 Mamba-2 layers, d_model 64, d_inner 128, 4 heads x 32" in done.stdout


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["model", "--set", "model.headdim=48"], "error: model setting: headdim must divide expand*d_model, got "
                                                 "headdim=48"),
        (["model", "--set", "model.d_modle=64"], "error: --set model.d_modle: `model --set` takes model settings "
                                                 "(model.d_model, ...); did you mean model.d_model?"),
        (["model", "--set", "d_model=64"], "error: --set d_model: `model --set` takes model settings (model.d_model, "
                                           "...); did you mean model.d_model?"),
        (["model", "--set", "d_model"], "error: a --set is not KEY=VALUE (its text is not repeated: it may be a "
                                        "value), e.g. --set model.d_model=64"),
        (["model", "--set", "model.dt_limit=[0, "], "error: --set model.dt_limit: the value is not valid YAML"),
        (["model", "--set", "model.A_init_range=3"], "error: model setting:"),
        (["frobnicate"], "error: argument command: invalid choice: 'frobnicate'"),
        (["model", "--set", "model.backend=mamba_ssm"], "error: model.backend <--set model.backend> cannot run "
                                                        "here: mamba-ssm's fused kernels do not load (import "),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args, match):
    assert_one_line_error(run_cli(*args), match.removeprefix("error: "))


SECRET = "https://hooks.slack.com/services/T000/B000/" + "S3CR3TT0K3N"  # a webhook URL: a secret


@pytest.mark.parametrize(("args", "match"), [
    (["space", "show", "search_spaces/smoke.yaml", "--set", f"notify.webhook=ftp{SECRET[5:]}"],
     r"^error: search_spaces/smoke\.yaml \(with --set notify\.webhook=\.\.\.\): notify\.webhook must be http or https"),
    (["space", "show", "search_spaces/smoke.yaml", f"--set=run.model.d_model={SECRET}"],
     r"^error: .* d_model must be a positive integer, got <--set run\.model\.d_model>$"),
    (["model", "--set", f"model.backend={SECRET}"], r"^error: model setting: .*<--set model\.backend>"),
    (["space", "keys", "--notfy", SECRET], r"^error: unrecognized arguments: --notfy <a value, not repeated>; see "),
    (["space", "show", "search_spaces/smoke.yaml", "--se", f"notify.webhook={SECRET}"],
     r"^error: unrecognized arguments: --se <a value, not repeated>; see "),
    (["space", "show", "search_spaces/smoke.yaml", f"--se=notify.webhook={SECRET}"],
     r"^error: unrecognized arguments: --se; see "),
    (["space", "--se", f"notify.webhook={SECRET}"],
     r"^error: argument space_command: invalid choice: <a value, not repeated> \(choose from 'keys', 'show'\)"),
    (["model", f"-h{SECRET}"], r"^error: argument -h/--help: ignored explicit argument <a value, not repeated>"),
], ids=["webhook by --set", "a value where a number goes", "model --set", "a mistyped --notify", "--set abbreviated",
        "--set= abbreviated", "a value where a subcommand goes", "a value glued to -h"])
def test_main_never_repeats_a_set_value_or_an_unknown_arguments_value_in_its_error(args, match, capsys):
    from tuning.cli.main import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert re.match(match, err) and err.count("\n") == 1, err
    assert "S3CR3TT0K3N" not in err


def test_main_names_a_plain_stray_argument_as_typed(capsys):
    from tuning.cli.main import main

    assert main(["space", "keys", "20"]) == 2
    assert capsys.readouterr().err.startswith("error: unrecognized arguments: 20; see ")


def test_build_parser_takes_no_option_by_a_prefix_in_any_subcommand():
    import argparse

    from tuning.cli.main import build_parser

    def parsers(parser):
        yield parser
        for action in parser._actions:  # the subcommands' parsers: argparse gives no public way to them
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from parsers(sub)

    found = list(parsers(build_parser()))
    assert len(found) > 10 and all(not parser.allow_abbrev for parser in found)
