"""One dotted name for every setting: a space's top-level data/model/train sections and `run:` (their older
spelling) are the same settings; --set, search entries and initial points take the same names; two names of one
setting in one place are refused in one line; an unknown key names the nearest known ones."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.cli import ROOT
from tuning.errors import UsageError
from tuning.search.effective_space import effective_values
from tuning.search.overrides import parse_sets, with_sets
from tuning.search.param_text import column, other_params_text, params_text
from tuning.search.recipe import TrainingRecipe
from tuning.search.searchable import resolve
from tuning.search.space import parse_space
from tuning.yaml_io import ConfigError, read_yaml

SMOKE = read_yaml(ROOT / "search_spaces" / "smoke.yaml", "search space")  # written in the new spelling


def older(values: dict) -> dict:
    """A space's values in the older spelling: its data, model and train sections under run:."""
    run = {section: values[section] for section in ("data", "model", "train") if section in values}
    return {**{k: v for k, v in values.items() if k not in run}, "run": run}


def refused(values: dict, match: str) -> str:
    with pytest.raises(ConfigError, match=match) as caught:
        parse_space(values, "space.yaml")
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_the_shipped_spaces_write_the_run_settings_at_the_top_level():
    for path in sorted((ROOT / "search_spaces").glob("*.yaml")):
        values = read_yaml(path, "search space")
        assert "run" not in values and {"data", "model", "train"} <= set(values), path.name


def test_run_is_the_older_spelling_of_the_same_settings():
    space = parse_space(SMOKE, "smoke.yaml")
    assert parse_space(older(SMOKE), "smoke.yaml") == space  # an older sweep's stored space reads the same
    assert space.run.model.d_model == 32 and space.run.data.window == 32


def test_the_two_spellings_may_share_a_section_but_not_a_setting():
    mixed = {**SMOKE, "run": {"model": {"expand": 4}}}
    assert parse_space(mixed, "space.yaml").run.model.expand == 4 and parse_space(mixed, "s").run.model.d_model == 32
    refused({**SMOKE, "run": {"model": {"d_model": 64}}},
            r"^space.yaml: model.d_model is given twice, as model.d_model and run.model.d_model; keep one$")


@pytest.mark.parametrize("spelling", [lambda v: v, older], ids=["new spelling", "older spelling"])
@pytest.mark.parametrize("key", ["model.d_model", "run.model.d_model"])
def test_set_by_either_name_sets_the_setting_where_the_file_gives_it(spelling, key):
    values = with_sets(spelling(copy.deepcopy(SMOKE)), parse_sets([f"{key}=64", "data.horizon=3"]))
    space = parse_space(values, "space.yaml")  # never given twice, whichever spelling
    assert (space.run.model.d_model, space.run.model.n_layers, space.run.data.horizon) == (64, 2, 3)


def test_set_takes_a_short_name_as_its_setting_and_refuses_two_names_of_one():
    assert parse_sets(["learning_rate=1e-3"]) == [(("train", "lr"), 0.001)]
    assert with_sets({}, parse_sets(["batch_size=64"])) == {"train": {"batch_size": 64}}
    for pairs, first, second, name in [(["learning_rate=1e-3", "train.lr=2e-3"], "learning_rate", "train.lr",
                                        "train.lr"),
                                       (["model.d_model=64", "run.model.d_model=32"], "model.d_model",
                                        "run.model.d_model", "model.d_model")]:
        with pytest.raises(UsageError, match=rf"^--set {first} and --set {second} both set {name}; give one of them$"):
            parse_sets(pairs)


@pytest.mark.parametrize("pair", ["train.lr=1e-3", "learning_rate=1e-3", "run.train.lr=1e-3"])
def test_a_searched_setting_fixed_as_well_is_refused_naming_both(pair):
    refused(with_sets(SMOKE, parse_sets([pair])),
            r"^space.yaml: train.lr is searched \(search.learning_rate\) and fixed \((run\.)?train.lr\); a searched "
            r"setting takes its values from search; remove one$")


def test_one_setting_searched_under_two_names_is_refused():
    search = {**SMOKE["search"], "train.lr": {"low": 1e-4, "high": 1e-2, "log": True}}
    refused({**SMOKE, "search": search}, r"^space.yaml: search gives train.lr twice, as learning_rate and train.lr "
                                         r"\(one setting, two Optuna dimensions\); keep one$")


def test_an_initial_point_names_a_searched_setting_by_either_name():
    point = {"train.lr": 1e-3, "train.weight_decay": 1e-1, "batch_size": 128}
    space = parse_space({**SMOKE, "initial": [point]}, "space.yaml")
    assert space.initial == ({"learning_rate": 1e-3, "weight_decay": 1e-1, "batch_size": 128},)  # the search's keys
    refused({**SMOKE, "initial": [{"train.lr": 1e-3, "learning_rate": 1e-3}]},
            r"^space.yaml: initial\[0\] gives train.lr twice, as train.lr and learning_rate; keep one$")
    refused({**SMOKE, "initial": [{"lr": 1e-3}]},
            r"^space.yaml: unknown key 'lr' in initial\[0\], which takes the searched settings; did you mean train.lr\?$")


@pytest.mark.parametrize(("values", "match"), [
    ({**SMOKE, "d_model": 64}, r"unknown key 'd_model' in the top level; did you mean model.d_model\?$"),
    ({**SMOKE, "scheduler": {"max_epoch": 6}}, r"unknown key 'max_epoch' in scheduler; did you mean "
                                               r"scheduler.max_epochs\?$"),
    ({**SMOKE, "train": {"lrr": 1e-3}}, r"unknown key train.lrr; did you mean train.lr\?$"),
    ({**SMOKE, "train": {"learning_rate": 1e-3}}, r"unknown key train.learning_rate; did you mean train.lr\?$"),
    ({**SMOKE, "search": {"model.d_modle": {"choices": [32]}}}, r"unknown search key 'model.d_modle'; did you mean "
                                                                r"model.d_model\?$"),
    ({**SMOKE, "zzz": 1}, r"unknown key 'zzz' in the top level; `mamba-tune space keys` lists every setting"),
])
def test_an_unknown_key_names_the_nearest_known_ones_not_all_of_them(values, match):
    assert "allowed:" not in refused(values, match)


def test_a_run_configuration_names_the_nearest_setting_too():
    with pytest.raises(ConfigError, match=r"^config: unknown key 'd_model' at the top level, whose sections are data, "
                                          r"model, train; did you mean model.d_model\?$"):
        TrainingRecipe.from_dict({"d_model": 64})
    with pytest.raises(ValueError, match=r"^unknown search key 'lr'; did you mean train.lr\?$"):
        resolve("lr")


def test_space_show_writes_the_new_spelling_without_the_searched_settings():
    values = effective_values(parse_space(older(SMOKE), "smoke.yaml"))
    assert "run" not in values and values["model"]["d_model"] == 32
    assert not {"lr", "weight_decay", "batch_size"} & set(values["train"])  # searched: their values are search's
    assert parse_space(values, "shown") == parse_space(SMOKE, "smoke.yaml")


def test_a_stored_space_that_fixed_a_searched_setting_is_read_as_it_was_run():
    # sweep.json of a sweep started before this was refused: it resumes, each trial taking the searched value
    values = older({**SMOKE, "train": {**SMOKE["train"], "batch_size": 256}})
    refused(values, r"train.batch_size is searched \(search.batch_size\) and fixed \(run.train.batch_size\)")
    assert parse_space(values, "sweep.json", stored=True).search["batch_size"].choices == (64, 128)


def test_a_stored_space_that_searched_one_setting_under_two_names_is_read_as_it_was_run():
    search = {**SMOKE["search"], "train.lr": {"low": 1e-4, "high": 1e-2, "log": True}}
    assert set(parse_space({**SMOKE, "search": search}, "sweep.json", stored=True).search) >= {"learning_rate",
                                                                                                  "train.lr"}


@pytest.mark.parametrize(("searched", "key"), [("learning_rate", "search.train.lr.high"),
                                               ("train.lr", "search.learning_rate.high")])
def test_set_of_a_search_entry_goes_to_the_entry_of_its_setting_by_either_name(searched, key):
    search = {k: v for k, v in SMOKE["search"].items() if k != "learning_rate"}
    values = {**SMOKE, "search": {searched: SMOKE["search"]["learning_rate"], **search}}
    space = parse_space(with_sets(values, parse_sets([f"{key}=3e-2"])), "space.yaml")
    assert space.search[searched].high == pytest.approx(3e-2) and len(space.search) == len(values["search"])


def test_a_space_without_a_name_is_named_by_its_file_with_set_too(tmp_path, capsys):
    from tuning.cli.main import main

    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in SMOKE.items() if k != "name"}))
    assert main(["space", "show", str(path), "--set", "data.window=48"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["name"] == "plain"


def test_a_mistyped_section_names_the_setting_it_was_meant_to_be():
    refused({**SMOKE, "schedulr": {"max_epochs": 6}}, r"unknown key 'schedulr' in the top level; did you mean "
                                                     r"scheduler.max_epochs\?$")
    refused({**SMOKE, "schedulr": 6}, r"unknown key 'schedulr' in the top level; did you mean scheduler\?$")


def test_the_leaderboard_shows_a_setting_searched_by_its_dotted_name_in_its_column():
    params = {"train.lr": 1e-3, "batch_size": 64, "model.d_model": 32}
    assert params_text(params) == "lr 1.00e-03, batch 64, model.d_model=32"  # train.lr once, in its column
    assert column(params, "learning_rate", ".2e", 9) == " 1.00e-03" and column(params, "weight_decay", "", 3) == "  -"
    assert other_params_text(params) == "model.d_model=32"
