"""The keys of a search space, generated from the dataclasses: every key the parser accepts is listed with the
parser's own default, bounds and search name, and a meaning read from its field's comment."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

import pytest

from model.train_config import BOUNDS
from tests.cli import ROOT
from tuning.search.field_comments import field_comments
from tuning.search.overrides import with_sets
from tuning.search.recipe import TrainingRecipe
from tuning.search.space import OLDER_RUN, TOP_LEVEL, parse_space
from tuning.search.space_keys import (
    FILE_NAME,
    MINIMAL_SPACE,
    REQUIRED,
    SEARCH_ENTRY,
    probe_space,
    refused_keys,
    search_names,
    section_keys,
    space_keys,
    yaml_text,
)
from tuning.search.space_keys_page import REGENERATE, keys_markdown, keys_table
from tuning.yaml_io import parse_yaml

KEYS = space_keys()
BY_KEY = {key.key: key for key in KEYS}
OWNERS = sorted({owner for key in KEYS for owner in key.owner.split(", ")})


@dataclass(frozen=True)
class _Commented:
    trailing: int = 1  # said on its line
    # said above it,
    # over two lines
    above: int = 2
    bare: int = 3
    both: int = 4  # the trailing one wins


@dataclass(frozen=True)
class _Inner:
    to: str = "ops"  # who is told


@dataclass(frozen=True)
class _Outer:
    enabled: bool = False  # whether anyone is told
    email: _Inner | None = None  # by email


def test_field_comments_reads_the_trailing_comment_else_the_lines_above():
    assert field_comments(_Commented) == {"trailing": "said on its line", "above": "said above it, over two lines",
                                          "bare": "", "both": "the trailing one wins"}


@pytest.mark.parametrize("owner", OWNERS)
def test_space_keys_every_key_has_a_meaning_from_its_fields_comment(owner):
    bare = [key.key for key in KEYS if owner in key.owner.split(", ") and not key.meaning]
    assert not bare, (f"{owner}: the fields behind {', '.join(bare)} have no comment; add a trailing `# what it "
                      f"means` to each in the dataclass, then regenerate docs/space-keys.md: {REGENERATE}")


def test_section_keys_list_a_section_within_a_section_key_by_key():
    keys = section_keys("notify", _Outer)
    assert [(k.key, k.type, k.default, k.meaning) for k in keys] == [
        ("notify.enabled", "bool", "false", "whether anyone is told"), ("notify.email.to", "str", "ops", "who is told")]


def test_space_keys_lists_every_top_level_key_the_parser_accepts():
    assert {key.key.split(".")[0] for key in KEYS} == set(TOP_LEVEL) - {OLDER_RUN}  # run: the older spelling


def test_space_keys_lists_every_run_field_but_those_the_sweep_sets():
    for section in ("data", "model", "train"):
        kind = typing.get_type_hints(TrainingRecipe)[section]
        expected = {f"{section}.{f.name}" for f in dataclasses.fields(kind)} - set(refused_keys())
        assert {key.key for key in KEYS if key.section == section} == expected


def test_space_keys_every_listed_section_key_is_accepted_at_its_default():
    for key in KEYS:
        if key.section in ("top level", "search") or key.default == REQUIRED:
            continue
        values = with_sets(probe_space(key.key), [(tuple(key.key.split(".")), _value(key.default))])
        parse_space(values, "space")  # raises ConfigError where the listing names a key the parser refuses


def test_space_keys_defaults_are_what_the_parser_fills_in():
    space = parse_space({**MINIMAL_SPACE, "confirm": {}}, "FILE.yaml")
    assert (BY_KEY["name"].default, BY_KEY["trials"].default, BY_KEY["seed"].default) == (FILE_NAME, "16", "0")
    assert BY_KEY["initial"].default == "[]" and BY_KEY[SEARCH_ENTRY].default == REQUIRED
    for section in ("scheduler", "gate", "resources", "confirm"):
        for field in dataclasses.fields(getattr(space, section)):
            assert BY_KEY[f"{section}.{field.name}"].default == yaml_text(getattr(getattr(space, section), field.name))
    recipe = TrainingRecipe()
    assert BY_KEY["model.dt_limit"].default == "[0.0, .inf]" == yaml_text(recipe.model.dt_limit)
    assert BY_KEY["train.lr"].default == yaml_text(recipe.train.lr)


def test_space_keys_types_are_the_fields_annotations():
    assert BY_KEY["gate.threshold"].type == "float | None" and BY_KEY["data.window"].type == "int"
    assert set(BY_KEY[SEARCH_ENTRY].type.split(" | ")) >= {"FloatRange", "Choice"}


def test_space_keys_bounds_come_from_the_train_bounds_table():
    for name, rule in BOUNDS.items():
        if f"train.{name}" in BY_KEY:
            assert BY_KEY[f"train.{name}"].bounds == str(rule)
    assert BY_KEY["train.eps"].bounds == "" and BY_KEY["model.d_model"].bounds == ""


def test_search_names_map_each_searchable_name_to_a_listed_run_key():
    names = search_names()
    assert names and all(key in BY_KEY for key in names)
    assert "learning_rate" in names["train.lr"]
    assert all(BY_KEY[key].searchable == ", ".join(found) for key, found in names.items())
    assert BY_KEY["scheduler.max_epochs"].searchable == ""


def test_search_names_give_each_setting_its_short_name_then_its_dotted_one_and_none_the_sweep_sets():
    names = search_names()
    assert names["train.lr"] == ("learning_rate", "train.lr")
    assert names["model.d_model"] == ("model.d_model",) and names["data.window"] == ("data.window",)
    assert not {"train.epochs", "train.seed", "data.fold", "data.target", "model.n_features",
                "data.columns", "train.betas"} & set(names)
    assert BY_KEY["model.d_model"].searchable == "model.d_model" and BY_KEY["train.betas"].searchable == ""


def test_refused_keys_name_run_train_epochs_with_the_parsers_reason():
    reasons = refused_keys()
    assert "train.epochs" in reasons and "scheduler.max_epochs" in reasons["train.epochs"]
    assert "train.epochs" not in BY_KEY and "train.lr" not in reasons


def test_keys_table_has_a_row_per_key_under_its_header():
    lines = keys_table(KEYS).splitlines()
    assert lines[0].split() == ["key", "type", "default", "bounds", "searchable", "meaning"]
    assert [line.split()[0] for line in lines[1:]] == [key.key for key in KEYS]
    assert any(line.startswith("train.lr (learning_rate) ") for line in lines)  # a short name beside its setting


def test_keys_markdown_escapes_pipes_and_lists_the_refused_keys():
    page = keys_markdown(KEYS, refused_keys())
    assert "| `gate.threshold` | float \\| None | `null` |" in page
    assert "## Set by the sweep" in page and "- `train.epochs`: " in page
    assert [line for line in page.splitlines() if line.startswith("## ")][:3] == ["## top level", "## search",
                                                                                  "## scheduler"]


def test_keys_markdown_the_committed_page_is_what_the_code_generates():
    committed = (ROOT / "docs" / "space-keys.md").read_text()
    assert committed == keys_markdown(KEYS, refused_keys()), (
        f"docs/space-keys.md differs from what the code generates now; regenerate it: {REGENERATE}")


def _value(text: str) -> object:
    return parse_yaml(text, "default")
