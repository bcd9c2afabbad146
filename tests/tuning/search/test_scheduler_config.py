"""scheduler.kind and its settings as a space writes them: a setting the kind does not take is refused in one line,
null leaves it out, each kind's settings read back from `space show`, and the sweep's line says which rule runs."""

from __future__ import annotations

import pytest

from tuning.search.effective_space import effective_values
from tuning.search.overrides import with_sets
from tuning.search.scheduler_config import KINDS, SchedulerConfig
from tuning.search.shipped_spaces import space_path
from tuning.search.space import parse_space
from tuning.yaml_io import ConfigError, read_yaml

SEARCH = {"learning_rate": {"low": 1e-5, "high": 1e-3, "log": True}}


def space(gate_epoch: int = 2, **scheduler) -> object:
    return parse_space({"search": SEARCH, "scheduler": scheduler, "gate": {"epoch": gate_epoch}}, "space.yaml")


@pytest.mark.parametrize(("scheduler", "message"), [
    ({"kind": "median", "reduction_factor": 3}, "space.yaml: scheduler.reduction_factor is set, and scheduler.kind "
     "median does not take it (only asha, hyperband do); remove it, or --set scheduler.reduction_factor=null"),
    ({"kind": "none", "grace_period": 2}, "space.yaml: scheduler.grace_period is set, and scheduler.kind none does "
     "not take it (only asha, hyperband, median do); remove it, or --set scheduler.grace_period=null"),
    ({"brackets": 2}, "space.yaml: scheduler.brackets is set, and scheduler.kind asha does not take it (only "
     "hyperband does); remove it, or --set scheduler.brackets=null"),
    ({"kind": "hyperband", "min_samples": 2}, "space.yaml: scheduler.min_samples is set, and scheduler.kind "
     "hyperband does not take it (only median does); remove it, or --set scheduler.min_samples=null"),
    ({"kind": "fifo"}, "space.yaml: scheduler: kind must be one of asha, hyperband, median, none, got 'fifo'"),
    ({"kind": "hyperband", "brackets": 4}, "space.yaml: scheduler: brackets 4: with grace_period 5, reduction_factor "
     "3 and max_epochs 50 only 3 have a rung (bracket s starts at grace_period * reduction_factor^s, which must not "
     "pass max_epochs); lower brackets to at most 3, leave it out (the most that fit, up to 3) or raise max_epochs"),
    ({"kind": "median", "min_samples": 0}, "space.yaml: scheduler: min_samples must be a positive integer, got 0"),
])
def test_a_setting_the_kind_does_not_take_or_a_bad_one_is_refused_in_one_line(scheduler, message):
    with pytest.raises(ConfigError) as refused:
        space(**scheduler)
    assert str(refused.value) == message and "\n" not in message


def test_a_setting_the_kind_does_not_take_written_null_is_left_out():
    assert space(kind="median", reduction_factor=None, min_samples=4).scheduler == SchedulerConfig(
        kind="median", min_samples=4)


def test_a_grace_period_beyond_max_epochs_is_refused_only_where_the_kind_reads_it():
    assert space(kind="none", max_epochs=3).scheduler.max_epochs == 3  # grace_period's default 5 is not read
    with pytest.raises(ConfigError, match="grace_period 5 is beyond max_epochs 3"):
        space(kind="median", max_epochs=3)


@pytest.mark.parametrize("kind", KINDS)
def test_space_show_writes_the_settings_its_kind_takes_and_reads_back_equal(kind):
    taken = {"asha": {"grace_period": 2}, "hyperband": {"brackets": 2}, "median": {"min_samples": 5}, "none": {}}
    parsed = space(kind=kind, max_epochs=20, **taken[kind])
    shown = effective_values(parsed)
    assert shown["scheduler"] == {"kind": kind, "max_epochs": 20, **parsed.scheduler.to_dict(), **taken[kind]}
    assert parse_space(shown, "space.yaml") == parsed


def test_a_space_without_a_kind_is_asha_as_before():
    assert space(max_epochs=20, grace_period=2, reduction_factor=2).scheduler == SchedulerConfig(
        kind="asha", max_epochs=20, grace_period=2, reduction_factor=2)


@pytest.mark.parametrize(("scheduler", "line"), [
    (SchedulerConfig(), "ASHA (grace 5, reduction 3, max 50 epochs)"),
    (SchedulerConfig(kind="hyperband", brackets=2), "Hyperband (2 brackets, grace 5, reduction 3, max 50 epochs)"),
    (SchedulerConfig(kind="median", grace_period=3, min_samples=4),
     "median stopping rule (grace 3, min samples 4, max 50 epochs)"),
    (SchedulerConfig(kind="none", max_epochs=20), "none (every trial runs to 20 epochs)"),
])
def test_describe_names_the_rule_and_the_settings_it_reads(scheduler, line):
    assert scheduler.describe() == line


def shipped_under_hyperband(name: str, *sets: tuple[tuple[str, ...], object]) -> object:
    """A shipped space as `--set scheduler.kind=hyperband` (and `sets`) runs it."""
    path = space_path(name)
    values = with_sets(read_yaml(path, "search space"), [(("scheduler", "kind"), "hyperband"), *sets])
    return parse_space(values, str(path))


@pytest.mark.parametrize(("name", "sets", "brackets"), [
    ("sp500", [], 2),  # 8 epochs, grace 2, reduction 3: brackets from epoch 2 and 6, not 18
    ("default", [(("scheduler", "max_epochs"), 20)], 2),  # --max-epochs 20: brackets from epoch 5 and 15
    ("default", [(("scheduler", "max_epochs"), 5), (("gate", "epoch"), 5)], 1),  # grace 5 is the only rung
    ("default", [], 3),  # 50 epochs: the default 3 fit
])
def test_hyperbands_brackets_left_out_are_the_most_that_fit_up_to_three(name, sets, brackets):
    scheduler = shipped_under_hyperband(name, *sets).scheduler
    assert scheduler.brackets == brackets
    assert scheduler.to_dict()["brackets"] == brackets  # MLflow's scheduler.brackets param, `space show`
    assert scheduler.describe().startswith(f"Hyperband ({brackets} brackets,")


def test_hyperbands_brackets_written_and_too_many_are_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        shipped_under_hyperband("sp500", (("scheduler", "brackets"), 3))
    assert str(refused.value).endswith(
        "sp500.yaml: scheduler: brackets 3: with grace_period 2, reduction_factor 3 and max_epochs 8 only 2 have a rung "
        "(bracket s starts at grace_period * reduction_factor^s, which must not pass max_epochs); lower brackets to at "
        "most 2, leave it out (the most that fit, up to 3) or raise max_epochs")
    assert "\n" not in str(refused.value)


def test_hyperbands_resolved_brackets_read_back_and_resume_the_same():
    parsed = shipped_under_hyperband("sp500")
    assert parse_space(effective_values(parsed), "space.yaml").scheduler == parsed.scheduler  # `space show`
    assert SchedulerConfig(kind="hyperband", max_epochs=8, grace_period=2) == parsed.scheduler  # resume re-parses
    assert SchedulerConfig(max_epochs=8, grace_period=2).brackets is None  # asha: no brackets to resolve
