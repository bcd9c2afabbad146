"""`sampler:` (tuning/search/samplers.py): Optuna's own samplers behind the sweep's searcher, seeded, recorded in
the study; the grid runs every combination once."""

from __future__ import annotations

import pytest

from tuning.search.samplers import grid_points
from tuning.search.searcher import make_searcher
from tuning.search.space import parse_space
from tuning.yaml_io import ConfigError

BASE = {"scheduler": {"max_epochs": 4, "grace_period": 1}, "gate": {"epoch": 2, "ratio_to_e0": 0.9}}
SEARCH = {"learning_rate": {"low": 1e-4, "high": 1e-2, "log": True}, "model.d_model": {"choices": [32, 64]},
          "data.window": {"low": 16, "high": 48, "step": 16}}
GRID = {"model.d_model": {"choices": [32, 64]}, "data.window": {"low": 16, "high": 48, "step": 16},
        "train.warmup_fraction": {"low": 0.0, "high": 0.1, "step": 0.05}}


def space_of(**top):
    return parse_space({**BASE, **top}, "s.yaml")


def asked(space, tmp_path, n):
    searcher = make_searcher(space, f"sqlite:///{tmp_path / 'optuna.db'}", "s")
    configs = [searcher.suggest(f"t{i}") for i in range(n)]
    return searcher, configs


@pytest.mark.parametrize("sampler", ["tpe", "random", "gp", "cmaes"])
def test_each_sampler_asks_points_inside_the_space_and_the_study_records_it(sampler, tmp_path):
    space = space_of(sampler=sampler, trials=6, search=SEARCH)
    searcher, configs = asked(space, tmp_path, 3)
    for config in configs:
        assert 1e-4 <= config["learning_rate"] <= 1e-2 and config["model.d_model"] in (32, 64)
        assert config["data.window"] in (16, 32, 48)
    assert searcher._ot_study.user_attrs["sampler"] == sampler
    assert type(searcher._sampler).__name__.lower().startswith({"tpe": "tpe", "random": "random", "gp": "gp",
                                                                "cmaes": "cmaes"}[sampler])


def test_the_same_seed_asks_the_same_points(tmp_path):
    space = space_of(sampler="random", trials=6, search=SEARCH)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert asked(space, tmp_path / "a", 3)[1] == asked(space, tmp_path / "b", 3)[1]


def test_a_grid_with_trials_unset_runs_every_combination_once(tmp_path):
    space = space_of(sampler="grid", search=GRID)
    assert space.trials == 2 * 3 * 3
    searcher, configs = asked(space, tmp_path, space.trials)
    assert sorted(map(_key, configs)) == sorted(map(_key, grid_points(space.search)))
    for i in range(space.trials):  # told as Tune tells it: the grid's end must not raise (Optuna's study.stop does)
        searcher.on_trial_complete(f"t{i}", {"epoch": 4, "val_loss": 0.5, "best_val_loss": 0.5, "e0_val_loss": 1.0})
    assert all(t.state.name == "COMPLETE" for t in searcher._ot_study.trials)


SQUARE = {"model.d_model": {"choices": [32, 64]}, "data.window": {"choices": [16, 32]}}  # a 2x2 grid
RESULT = {"epoch": 4, "val_loss": 0.5, "best_val_loss": 0.5, "e0_val_loss": 1.0}


@pytest.mark.parametrize("point", [{"model.d_model": d, "data.window": w} for d in (32, 64) for w in (16, 32)])
def test_a_grid_with_an_initial_point_on_it_runs_every_point_exactly_once(point, tmp_path):
    space = space_of(sampler="grid", search=SQUARE, initial=[point])
    assert space.trials == 4  # the initial point is its grid point's one run
    searcher = make_searcher(space, f"sqlite:///{tmp_path / 'optuna.db'}", "s")
    configs = []
    for i in range(space.trials):  # as Tune asks with one trial at a time: each told before the next is asked
        configs.append(searcher.suggest(f"t{i}"))
        searcher.on_trial_complete(f"t{i}", RESULT)
    assert configs[0] == point
    assert sorted(map(_key, configs)) == sorted(map(_key, grid_points(space.search)))


def test_a_grid_runs_its_points_and_each_initial_point_off_it_once(tmp_path):
    search = {"model.d_model": {"choices": [32, 64]},
              "train.warmup_fraction": {"low": 0.1, "high": 0.4, "step": 0.1}}  # its 0.1 + 2 * 0.1 is not 0.3
    on, off = {"model.d_model": 64, "train.warmup_fraction": 0.3}, {"model.d_model": 32, "train.warmup_fraction": 0.25}
    space = space_of(sampler="grid", search=search, initial=[on, off])
    assert space.trials == 2 * 4 + 1
    _, configs = asked(space, tmp_path, space.trials)  # all asked at once: the waiting and running hold theirs
    assert configs[:2] == [on, off]
    assert sorted(map(_key, configs)) == sorted(map(_key, grid_points(space.search) + [off]))


def _key(config):
    return tuple(round(v, 9) if isinstance(v, float) else v for v in (config[k] for k in sorted(config)))


@pytest.mark.parametrize(("top", "match"), [
    ({"sampler": "bayes", "search": SEARCH}, r"sampler must be one of tpe, random, gp, cmaes, grid, got 'bayes'"),
    ({"sampler": "grid", "search": SEARCH}, r"sampler grid needs search.learning_rate to be a choice list or a range "
                                            r"with step"),
    ({"sampler": "grid", "trials": 19, "search": GRID}, r"trials 19 is more than the grid's 18 combinations"),
    ({"sampler": "grid", "trials": 20, "search": GRID, "initial": [{"train.warmup_fraction": 0.03}]},
     r"s.yaml: trials 20 is more than the grid's 18 combinations and 1 initial point off it, which would run some "
     r"twice; lower trials or leave it unset"),
])
def test_a_sampler_the_space_cannot_use_is_one_clear_error(top, match):
    with pytest.raises(ConfigError, match=match):
        space_of(**top)
