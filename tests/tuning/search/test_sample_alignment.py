"""The rule that aligns a sweep's samples (tuning/search/sample_alignment.py): a space that searches data.window
gives every trial the samples of its longest window; one that searches nothing moving samples is left as it was."""

from __future__ import annotations

import pytest

from tests.cli import assert_one_line_error, run_cli
from tuning.search.recipe import TrainingRecipe
from tuning.search.sample_alignment import MOVES_SAMPLES, aligned_window, moves_samples
from tuning.search.search_section import Choice, IntRange
from tuning.search.searchable import searchable_settings
from tuning.search.space import parse_space, with_params
from tuning.search.space_keys import space_keys
from tuning.search.space_keys_page import MOVES_SAMPLES as MARK
from tuning.search.space_keys_page import keys_markdown, keys_table
from tuning.yaml_io import ConfigError

LR = {"learning_rate": {"low": 1e-4, "high": 1e-2, "log": True}}


def space(search: dict, run: dict | None = None, **top):
    return parse_space({"search": search, "run": run or {}, **top}, "space.yaml")


@pytest.mark.parametrize(("spec", "run_window", "expected"), [
    (Choice((32, 256, 64)), 128, 256),
    (IntRange(16, 100, step=16), 32, 96),  # the last step below high: no trial gets 100
    (IntRange(16, 64), 128, 128),  # the run's own window, its shared Dataset's, is longer
])
def test_aligned_window_is_the_longest_window_of_the_search_and_the_run(spec, run_window, expected):
    run = TrainingRecipe().replace("data", window=run_window)
    assert aligned_window({"data.window": spec}, run) == expected


def test_aligned_window_is_none_when_nothing_searched_moves_samples():
    run = TrainingRecipe()
    assert aligned_window({"learning_rate": Choice((1e-3,)), "data.residual_to": Choice(("har", "none"))}, run) is None
    assert aligned_window({"model.d_model": IntRange(16, 64)}, run) is None


def test_parse_space_aligns_every_trial_to_the_longest_searched_window():
    searched = space({**LR, "data.window": {"choices": [32, 256]}}, {"data": {"window": 64}},
                     initial=[{"learning_rate": 1e-3, "data.window": 32}])
    assert searched.run.data.align_window == 256
    runs = [with_params(searched.run, {"learning_rate": 1e-3, "data.window": w}) for w in (32, 256)]
    assert [(r.data.window, r.data.sample_window) for r in runs] == [(32, 256), (256, 256)]
    fold_two = with_params(searched.run, {"data.window": 32, "seed": 1, "fold": 2, "finalist": "t1"})
    assert (fold_two.data.fold, fold_two.data.sample_window) == (2, 256)  # a confirmation run: the same rule


def test_parse_space_without_a_searched_window_is_as_before():
    plain = space(LR, {"data": {"window": 64}})
    assert plain.run.data.align_window is None and plain.run.data.sample_window == 64
    assert plain.run == parse_space({"search": LR, "run": {"data": {"window": 64}}}, "other.yaml").run


def test_parse_space_refuses_an_align_window_the_sweep_sets():
    with pytest.raises(ConfigError, match=r"^space.yaml: run.data.align_window is set by the sweep, to the longest "
                                          r"data.window its trials read, .*; remove it$"):
        space(LR, {"data": {"align_window": 256}})


def test_align_window_cannot_be_searched():
    assert "data.align_window" not in searchable_settings()
    with pytest.raises(ConfigError, match=r"search: data.align_window cannot be searched: the sweep sets it"):
        space({"data.align_window": {"choices": [64, 128]}})


def test_every_searchable_data_setting_is_known_to_move_samples_or_not():
    # data.residual_to changes a trial's inputs, not its samples (its HAR input: the same fit on the same samples);
    # a newly searchable data setting must be classed here and, if it moves samples, aligned in sample_alignment.py
    data = {name for name, setting in searchable_settings().items() if setting.section == "data"}
    assert data == {"data.window", "data.residual_to"} and set(MOVES_SAMPLES) == {"data.window"}
    assert moves_samples("data.window") and not moves_samples("data.residual_to")


def test_space_keys_marks_the_settings_that_move_samples():
    keys = space_keys()
    marked = [k.key for k in keys if k.moves_samples]
    assert marked == ["data.window"]
    (window,) = [line for line in keys_table(keys).splitlines() if line.startswith("data.window ")]
    assert f"data.window {MARK}" in window
    assert f"| `data.window` {MARK} |" in keys_markdown(keys, {})
    assert all(MARK not in line for line in keys_table(keys).splitlines() if not line.startswith("data.window "))


def test_space_show_refuses_an_align_window_in_one_line(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("search: {data.window: {choices: [32, 64]}}\nrun: {data: {align_window: 64}}\n")
    assert_one_line_error(run_cli("space", "show", path), f"{path}: run.data.align_window is set by the sweep")
