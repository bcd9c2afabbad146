"""A space written out whole (`space show`): every default filled in, read back by parse_space to an equal space."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from tests.cli import ROOT
from tuning.search.effective_space import effective_values, effective_yaml
from tuning.search.overrides import parse_sets, with_sets
from tuning.search.space import load_space, parse_space
from tuning.yaml_io import parse_yaml, read_yaml

SPACES = sorted((ROOT / "search_spaces").glob("*.yaml"))


@pytest.mark.parametrize("path", SPACES, ids=[p.name for p in SPACES])
def test_effective_yaml_reads_back_to_an_equal_space(path):
    space = load_space(path)
    assert parse_space(parse_yaml(effective_yaml(space, str(path)), "shown"), str(path)) == space


def test_effective_yaml_with_sets_reads_back_to_the_space_sweep_would_run():
    path = ROOT / "search_spaces" / "smoke.yaml"
    sets = parse_sets(["scheduler.max_epochs=20", "search.learning_rate.high=3e-3", "confirm=null"])
    space = parse_space(with_sets(read_yaml(path, "search space"), sets), str(path))
    shown = parse_yaml(effective_yaml(space, str(path)), "shown")
    assert shown["scheduler"]["max_epochs"] == 20 and shown["search"]["learning_rate"]["high"] == 3e-3
    assert shown["confirm"] is None and parse_space(shown, str(path)) == space


def test_effective_values_fill_in_the_defaults_the_file_leaves_out():
    values = effective_values(load_space(ROOT / "search_spaces" / "smoke.yaml"))  # no threshold, max_failures...
    assert values["gate"]["threshold"] is None and values["gate"]["baseline"] == "har"
    assert values["resources"]["max_failures"] == 2 and values["resources"]["custom"] == {}
    assert values["model"]["expand"] == 2 and values["train"]["betas"] == [0.9, 0.999] and "run" not in values
    assert list(values)[:3] == ["name", "trials", "seed"]


def test_effective_values_leave_out_the_settings_the_sweep_sets_itself():
    values = effective_values(load_space(ROOT / "search_spaces" / "smoke.yaml"))
    assert "epochs" not in values["train"] and {"data", "model", "train"} <= set(values)
    assert not {"lr", "weight_decay", "batch_size"} & set(values["train"])  # searched: from search alone


def test_effective_values_write_a_search_entry_without_to_dict_without_its_unset_fields():
    @dataclass(frozen=True)
    class Stepped:
        low: int
        high: int
        step: int | None = None

    space = load_space(ROOT / "search_spaces" / "smoke.yaml")
    search = {**space.search, "data.window": Stepped(32, 256)}
    values = effective_values(dataclasses.replace(space, search=search))
    assert values["search"]["data.window"] == {"low": 32, "high": 256}


def test_effective_yaml_writes_short_lists_on_one_line_under_a_header_naming_the_file():
    text = effective_yaml(load_space(ROOT / "search_spaces" / "smoke.yaml"), "search_spaces/smoke.yaml")
    assert text.startswith("# The search space search_spaces/smoke.yaml\n")
    assert "    choices: [64, 128]\n" in text and "mamba-tune sweep --data BARS.parquet --space THIS.yaml" in text


def test_effective_values_show_a_webhook_by_its_host_alone():
    space = parse_space({**read_yaml(ROOT / "search_spaces" / "smoke.yaml", "space"),
                         "notify": {"webhook": "https://hooks.slack.com/services/T/B/" + "S3CR3T"}}, "s.yaml")
    shown = effective_yaml(space, "s.yaml")
    assert "S3CR3T" not in shown and "<not shown: a secret, to hooks.slack.com>" in shown
