"""--set KEY=VALUE (tuning/search/overrides.py): values typed as a user means them, dotted keys into the file's
sections, and one clear error for what cannot be set."""

from __future__ import annotations

import pytest

from tuning.errors import UsageError
from tuning.search.overrides import described, parse_sets, value_of, with_sets


@pytest.mark.parametrize(("text", "value"), [("20", 20), ("3e-3", 0.003), ("-1.5", -1.5), ("true", True),
                                             ("null", None), ("[32, 64]", [32, 64]), ("{low: 1, high: 4}",
                                                                                      {"low": 1, "high": 4}),
                                             ("bf16", "bf16"), ("", "")])
def test_value_of_reads_numbers_as_numbers_and_the_rest_as_yaml(text, value):
    assert value_of(text) == value and type(value_of(text)) is type(value)


def test_with_sets_sets_dotted_keys_over_the_files_values_and_leaves_them_unchanged():
    values = {"scheduler": {"max_epochs": 6, "grace_period": 2}, "search": {"learning_rate": {"low": 1e-5}}}
    sets = parse_sets(["scheduler.max_epochs=20", "search.learning_rate.high=3e-3", "confirm.top_k=1"])
    assert with_sets(values, sets) == {"scheduler": {"max_epochs": 20, "grace_period": 2},
                                       "search": {"learning_rate": {"low": 1e-5, "high": 0.003}},
                                       "confirm": {"top_k": 1}}
    assert values["scheduler"]["max_epochs"] == 6  # the file's values are not changed
    assert with_sets(values, []) is values


@pytest.mark.parametrize(("pairs", "match"), [
    (["scheduler.max_epochs"], r"--set 'scheduler.max_epochs' is not KEY=VALUE with a dotted key"),
    (["scheduler..max_epochs=3"], r"--set 'scheduler..max_epochs=3' is not KEY=VALUE"),
    (["trials.count=3"], r"--set trials.count: trials is a setting \(8\), not a section of settings; set it whole"),
])
def test_with_sets_refuses_what_cannot_be_set_in_one_line(pairs, match):
    with pytest.raises(UsageError, match=match):
        with_sets({"trials": 8}, parse_sets(pairs))


def test_described_names_the_file_and_its_sets():
    assert described("smoke.yaml", ["a=1", "b.c=2"]) == "smoke.yaml (with --set a=1 --set b.c=2)"
    assert described("smoke.yaml", []) == "smoke.yaml"


def test_with_sets_reaches_a_search_entry_by_its_dotted_name_whole_or_one_key_of_it():
    values = {"search": {"model.d_model": {"choices": [32, 64]}}}
    sets = parse_sets(["search.model.d_model.choices=[64, 128]", "search.data.window={low: 32, high: 96, step: 32}",
                       "search.data.window.high=128", "sampler=grid"])
    assert with_sets(values, sets) == {"search": {"model.d_model": {"choices": [64, 128]},
                                                  "data.window": {"low": 32, "high": 128, "step": 32}},
                                       "sampler": "grid"}
