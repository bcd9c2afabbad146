"""The API's keywords are the CLI's arguments: the same names, the same defaults (the parser's), the same words."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest

import mamba_tune
from mamba_tune.argv import arguments, argv_for, command_parser
from mamba_tune.commands import API_ONLY
from tuning.cli.main import parse_command

COMMANDS = {mamba_tune.sweep: ("sweep",), mamba_tune.resume: ("resume",), mamba_tune.best: ("best",),
            mamba_tune.train: ("train",), mamba_tune.promote: ("promote",), mamba_tune.import_bars: ("data", "import"),
            mamba_tune.synth_bars: ("data", "synth")}
# The fewest keywords each command needs (its required arguments), and the same as the CLI's words
REQUIRED = {("sweep",): ({"data": "bars.parquet", "space": "smoke"}, ["--data", "bars.parquet", "--space", "smoke"]),
            ("resume",): ({"name": "smoke"}, ["smoke"]),
            ("best",): ({"name": "smoke"}, ["smoke"]),
            ("train",): ({"data": "bars.parquet"}, ["--data", "bars.parquet"]),
            ("promote",): ({"model": "m", "data": "new.parquet"}, ["m", "--data", "new.parquet"]),
            ("data", "import"): ({"source": "a.csv", "out": "a.parquet"}, ["a.csv", "--out", "a.parquet"]),
            ("data", "synth"): ({"out": "b.parquet"}, ["--out", "b.parquet"])}


@pytest.mark.parametrize("function", list(COMMANDS), ids=lambda f: f.__name__)
def test_each_function_takes_its_commands_arguments_and_no_others(function):
    parameters = inspect.signature(function).parameters
    cli = arguments(COMMANDS[function])
    assert [p for p in parameters if p not in API_ONLY] == list(cli), \
        "a CLI argument was added or removed: add it to mamba_tune/commands.py and docs/python-api.md"
    required = [name for name, action in cli.items() if not action.option_strings or action.required]
    assert [name for name, p in parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == required


@pytest.mark.parametrize("function", list(COMMANDS), ids=lambda f: f.__name__)
def test_a_keyword_left_at_its_default_gives_the_clis_default(function):
    """Every keyword at its Python default is no word at all, so the parse is the CLI's with only the required words."""
    command = COMMANDS[function]
    keywords, words = REQUIRED[command]
    defaults = {name: p.default for name, p in inspect.signature(function).parameters.items()
                if p.default is not inspect.Parameter.empty and name not in API_ONLY}
    argv = argv_for(command, {**defaults, **keywords})
    assert vars(parse_command(argv)) == vars(parse_command([*command, *words]))


def test_keywords_become_the_flags_the_cli_parses():
    argv = argv_for(("sweep",), {"data": Path("bars.parquet"), "space": "smoke", "tracking_uri": "http://mlflow:5000",
                                 "dashboard": True, "trials": 3, "memory_budget": 512.5,
                                 "set": {"scheduler.max_epochs": 4, "model.dt_limit": [0.0, 1.0]},
                                 "column": ["timestamp=ts_event"]})
    args = parse_command(argv)
    assert (args.tracking_uri, args.dashboard, args.trials, args.memory_budget) == ("http://mlflow:5000", True, 3, 512.5)
    assert args.set == ["scheduler.max_epochs=4", "model.dt_limit=[0.0, 1.0]"]
    assert args.column == ["timestamp=ts_event"]
    assert str(args.data) == "bars.parquet"


def test_a_value_that_starts_with_a_dash_stays_a_value():
    args = parse_command(argv_for(("data", "import"), {"source": "a.csv", "out": "b.parquet", "timezone": "-05:00"}))
    assert args.timezone == "-05:00"


def test_a_set_as_one_string_or_a_list_is_taken_as_given():
    for given in ("trials=2", ["trials=2"]):
        args = parse_command(argv_for(("sweep",), {"data": "b.parquet", "space": "smoke", "set": given}))
        assert args.set == ["trials=2"]


def test_true_for_an_argument_that_takes_a_value_is_a_type_error():
    with pytest.raises(TypeError, match="only on/off flags"):
        argv_for(("sweep",), {"data": "b.parquet", "space": "smoke", "trials": True})


def test_a_keyword_no_command_takes_is_a_type_error():
    with pytest.raises(TypeError, match="no argument 'trails'"):
        argv_for(("sweep",), {"data": "b.parquet", "space": "smoke", "trails": 3})


def test_the_parsers_commands_are_the_clis():
    assert isinstance(command_parser(("data", "import")), argparse.ArgumentParser)
    assert command_parser(("sweep",)).prog.endswith("sweep")
