"""--set KEY=VALUE (tuning/search/overrides.py): values typed as a user means them, dotted keys into the file's
sections, and one clear error for what cannot be set."""

from __future__ import annotations

import pytest

from tuning.errors import UsageError
from tuning.search.overrides import described, hide_set_values, parse_sets, value_of, with_sets


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
    (["scheduler.max_epochs"], r"^--set number 1 has no '=', so it is not KEY=VALUE \(its text is not repeated"),
    (["scheduler..max_epochs=3"], r"^--set scheduler\.\.max_epochs=\.\.\. is not KEY=VALUE with a dotted key"),
    (["trials.count=3"], r"^--set trials\.count: trials is a setting, not a section of settings; set it whole"),
])
def test_with_sets_refuses_what_cannot_be_set_in_one_line(pairs, match):
    with pytest.raises(UsageError, match=match):
        with_sets({"trials": 8}, parse_sets(pairs))


SECRET = "https://hooks.slack.com/services/T000/B000/" + "S3CR3TT0K3N"  # a webhook URL: a secret


def test_parse_sets_never_repeats_a_value_given_without_its_key():
    with pytest.raises(UsageError, match=r"^--set number 2 has no '='") as refused:
        parse_sets(["trials=3", SECRET])
    assert "S3CR3TT0K3N" not in str(refused.value)


def test_parse_sets_names_a_key_of_empty_names_without_its_value():
    with pytest.raises(UsageError, match=r"^--set notify\.\.webhook=\.\.\. is not KEY=VALUE") as refused:
        parse_sets([f"notify..webhook={SECRET}"])
    assert "S3CR3TT0K3N" not in str(refused.value)


def test_with_sets_never_repeats_the_value_of_a_setting_it_cannot_cross():
    with pytest.raises(UsageError, match=r"^--set notify\.webhook\.x: notify\.webhook is a setting, not a "
                                         r"section") as refused:
        with_sets({}, parse_sets([f"notify.webhook={SECRET}", "notify.webhook.x=1"]))
    assert "S3CR3TT0K3N" not in str(refused.value)


@pytest.mark.parametrize(("pair", "message", "shown"), [
    (f"notify.webhook={SECRET}", f"notify.webhook must be http, got '{SECRET}'; fix",
     "notify.webhook must be http, got <--set notify.webhook>; fix"),
    (f"a.b={SECRET}", f"a.b: {SECRET} is no number", "a.b: <--set a.b> is no number"),
    (f"a.b=[{SECRET}, 1]", f"got ['{SECRET}', 1]", "got <--set a.b>"),
    (f"a.b={{url: {SECRET}}}", f"got url={SECRET}", "got url=<--set a.b>"),
    ("run.train.precision=bf17", "precision must be fp32 or bf16, got 'bf17'",
     "precision must be fp32 or bf16, got <--set run.train.precision>"),
    ("scheduler.max_epochs=0", "max_epochs must be a positive integer, got 0, grace_period 20",
     "max_epochs must be a positive integer, got 0, grace_period 20"),
    ("a.b=ok", "a.b got 'ok', ok", "a.b got <--set a.b>, ok"),
], ids=["quoted", "bare", "in a list", "in a mapping", "enum", "a short number", "a short word"])
def test_hide_set_values_takes_a_value_out_where_it_stands_quoted_or_long(pair, message, shown):
    assert hide_set_values(message, [pair]) == shown


def test_described_names_the_file_and_its_sets():
    assert described("smoke.yaml", ["a=1", "b.c=2"]) == "smoke.yaml (with --set a=... --set b.c=...)"
    assert described("smoke.yaml", []) == "smoke.yaml"


def test_with_sets_reaches_a_search_entry_by_its_dotted_name_whole_or_one_key_of_it():
    values = {"search": {"model.d_model": {"choices": [32, 64]}}}
    sets = parse_sets(["search.model.d_model.choices=[64, 128]", "search.data.window={low: 32, high: 96, step: 32}",
                       "search.data.window.high=128", "sampler=grid"])
    assert with_sets(values, sets) == {"search": {"model.d_model": {"choices": [64, 128]},
                                                  "data.window": {"low": 32, "high": 128, "step": 32}},
                                       "sampler": "grid"}
