"""`mamba-tune space keys | show` as a user runs them: the table, the page, a space whole, and bad input as one
line with exit 2."""

from __future__ import annotations

import pytest

from tests.cli import ROOT, assert_one_line_error, run_cli
from tuning.cli.main import main
from tuning.search.overrides import parse_sets, with_sets
from tuning.search.space import parse_space
from tuning.search.space_keys import refused_keys, space_keys
from tuning.search.space_keys_page import keys_markdown
from tuning.yaml_io import parse_yaml, read_yaml

SMOKE = ROOT / "search_spaces" / "smoke.yaml"


def test_space_keys_prints_a_row_per_key(capsys):
    assert main(["space", "keys"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(space_keys()) and lines[1].startswith("name ")
    assert any(line.startswith("train.lr (learning_rate) ") for line in lines)
    assert not any(line.startswith("run.") for line in lines)  # run: is the older spelling, not listed


def test_space_keys_markdown_prints_the_page(capsys):
    assert main(["space", "keys", "--markdown"]) == 0
    assert capsys.readouterr().out == keys_markdown(space_keys(), refused_keys())


def test_space_show_prints_the_space_sweep_would_run_with_its_sets(capsys):
    pairs = ["scheduler.max_epochs=20", "run.model.d_model=64", "gate.threshold=2.5"]
    assert main(["space", "show", str(SMOKE), *sum((["--set", p] for p in pairs), [])]) == 0
    out = capsys.readouterr().out
    expected = parse_space(with_sets(read_yaml(SMOKE, "search space"), parse_sets(pairs)), str(SMOKE))
    assert parse_space(parse_yaml(out, "shown"), str(SMOKE)) == expected
    assert expected.scheduler.max_epochs == 20 and expected.run.model.d_model == 64 and "threshold: 2.5" in out


def test_space_show_takes_dotted_search_entries_and_a_sampler_from_sets(capsys):
    pairs = ["search.model.expand={choices: [2, 4]}", "search.data.window.low=32", "search.data.window.high=96",
             "search.data.window.step=32", "sampler=random"]
    assert main(["space", "show", str(SMOKE), *sum((["--set", p] for p in pairs), [])]) == 0
    shown = parse_space(parse_yaml(capsys.readouterr().out, "shown"), str(SMOKE))
    assert shown.sampler == "random" and shown.search["model.expand"].choices == (2, 4)
    assert list(shown.search["data.window"].values()) == [32, 64, 96]


@pytest.mark.parametrize(("args", "starts"), [
    (("space", "show", "search_spaces/missing.yaml"), "search_spaces/missing.yaml: cannot read the search space"),
    (("space", "show", str(SMOKE), "--set", "scheduler"), "--set number 1 has no '=', so it is not KEY=VALUE"),
    (("space", "show", str(SMOKE), "--set", "scheduler.bogus=1"), f"{SMOKE} (with --set scheduler.bogus=...): unknown "
                                                                    "key 'bogus' in scheduler"),
    (("space", "show", str(SMOKE), "--set", "scheduler.grace_period=99"), f"{SMOKE} (with --set "),
    (("space", "show", str(SMOKE), "--set", "search.model.d_modle.choices=[1]"), f"{SMOKE} (with --set search.model."
                                                                                 "d_modle.choices=...): search: unknown "
                                                                                 "search key 'model.d_modle'; did you "
                                                                                 "mean model.d_model?"),
    (("space", "show", str(SMOKE), "--set", "search.train.seed.choices=[1, 2]"), f"{SMOKE} (with --set search.train."
                                                                                 "seed.choices=...): search: train."
                                                                                 "seed cannot be searched"),
], ids=["missing-file", "not-key-value", "unknown-key", "invalid-value", "unknown-search-key", "set-by-the-sweep"])
def test_space_show_bad_input_is_one_line_and_exit_2(args, starts):
    assert_one_line_error(run_cli(*args), starts)
