"""The shipped search spaces and the one rule for `--space VALUE`: a path is a file, a bare name a shipped space."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import ROOT, assert_one_line_error, run_cli
from tuning.errors import UsageError
from tuning.search.shipped_spaces import shipped_spaces, space_path


def test_shipped_spaces_are_the_yamls_of_search_spaces():
    spaces = shipped_spaces()
    assert {name: path.resolve() for name, path in spaces.items()} == {
        path.stem: path.resolve() for path in (ROOT / "search_spaces").glob("*.yaml")}
    assert {"default", "smoke", "sp500"} <= set(spaces)


def test_space_path_finds_a_shipped_space_by_its_name():
    assert space_path("smoke").resolve() == (ROOT / "search_spaces" / "smoke.yaml").resolve()


@pytest.mark.parametrize("value", ["smoke.yaml", "mine.yml", "search_spaces/smoke", "./smoke", "/abs/smoke"])
def test_space_path_takes_a_value_with_a_slash_or_yaml_suffix_as_the_path_given(value):
    assert space_path(value) == Path(value)


def test_space_path_refuses_a_name_nothing_ships_naming_those_that_do():
    with pytest.raises(UsageError, match=r"no shipped search space named 'smok', .* one of default, smoke, sp500; "
                                         r".*\(\./smok\.yaml\)$"):
        space_path("smok")


@pytest.mark.parametrize("args", [("space", "show", "smok"), ("sweep", "--data", "bars.parquet", "--space", "smok"),
                                  ("data", "check", "bars.parquet", "--space", "smok")],
                         ids=["space-show", "sweep", "data-check"])
def test_space_option_of_an_unknown_name_is_one_line_and_exit_2(args, tmp_path):
    assert_one_line_error(run_cli(*args, cwd=tmp_path), "no shipped search space named 'smok'")
