"""Search-space YAML: the shipped spaces load; each problem is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tuning.search.finalists import ConfirmConfig
from tuning.search.space import Choice, FloatRange, load_space
from tuning.yaml_io import ConfigError, parse_yaml

ROOT = Path(__file__).resolve().parents[3]


def test_space_default_is_the_original_system_workload():
    space = load_space(ROOT / "search_spaces/default.yaml")
    assert space.search["learning_rate"] == FloatRange(1e-5, 1e-2, log=True)
    assert space.search["batch_size"] == Choice((128, 256, 512, 1024))
    assert space.initial == ({"learning_rate": 5e-5, "weight_decay": 1e-4, "batch_size": 512},)
    assert (space.scheduler.max_epochs, space.gate.epoch, space.gate.ratio_to_baseline) == (50, 15, 1.0)
    assert space.gate.baseline == "har" and space.run.data.residual  # the model starts at HAR and must beat it
    assert space.run.train.epochs == 50 and space.run.data.val_fraction == 0.2
    assert space.run.data.test_fraction == 0.1 and space.confirm == ConfirmConfig(top_k=3, seeds=(1, 2), folds=1)
    assert space.resources.gpus_per_trial == "auto"  # the cluster's GPUs where there are any, else CPUs


def test_space_smoke_loads_and_is_small():
    space = load_space(ROOT / "search_spaces/smoke.yaml")
    assert space.scheduler.max_epochs <= 6 and space.gate.epoch < space.scheduler.max_epochs
    assert space.run.model.d_model == 32
    assert space.confirm == ConfirmConfig(top_k=2, seeds=(1,), folds=1)


@pytest.mark.parametrize("name", ["default.yaml", "smoke.yaml"])
def test_space_files_open_with_the_command_that_runs_them(name):
    text = (ROOT / "search_spaces" / name).read_text()
    assert f"mamba-tune sweep --data bars.parquet --space search_spaces/{name}" in text.split("\nname:")[0]


def write(tmp_path, change):
    """The smoke space with `change` applied (dotted keys; None deletes)."""
    values = parse_yaml((ROOT / "search_spaces/smoke.yaml").read_text(), "smoke.yaml")
    for dotted, value in change.items():
        *parents, last = dotted.split(".")
        node = values
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"trails": 8}, r"unknown key 'trails' in the top level; did you mean trials"),
        ({"search.momentum": {"low": 0.1, "high": 0.9}}, r"unknown search key 'momentum'; `mamba-tune space keys` lists every setting"),
        ({"search": {"train.epochs": {"low": 2, "high": 9}}}, r"search: train.epochs cannot be searched: the epoch budget is scheduler.max_epochs"),
        ({"search": {"data.target": {"choices": ["return", "close"]}}}, r"data.target cannot be searched: trials forecasting different targets"),
        ({"search": {"model.d_model": {"low": 16.5, "high": 64}}}, r"search.model.d_model needs int low and high \(model.d_model\)"),
        ({"search": {"model.bias": {"low": 0, "high": 1}}}, r"search.model.bias: model.bias takes bool values, so it needs a choice list"),
        ({"search": {"model.bias": {"choices": [True, 1]}}}, r"search.model.bias.choices must be bool values"),
        ({"search": {"data.window": {"low": 32, "high": 256, "step": 0}}}, r"search.data.window.step must be a positive int, got 0"),
        ({"search": {"data.window": {"low": 32, "high": 256, "step": 32, "log": True}}}, r"search.data.window: step and log cannot be combined"),
        ({"search": {"model.d_model": {"choices": [0, 64]}}}, r"search.model.d_model: 0 is refused in every combination .*d_model must be a positive integer"),
        ({"search": {"model.headdim": {"choices": [48, 96]}}}, r"no combination of the searched values is valid, e.g. .*headdim must divide expand\*d_model"),
        ({"model.d_model": None, "search": {"model.d_model": {"choices": [64, 96]}}, "initial": [{"model.d_model": 128}]}, r"initial\[0\].model.d_model = 128 lies outside search.model.d_model"),
        ({"search.learning_rate": {"low": 0.1, "high": 0.01, "log": True}}, r"search.learning_rate: low 0.1 must be below high 0.01"),
        ({"search.weight_decay": {"low": 0.0, "high": 0.1, "log": True}}, r"search.weight_decay: a log scale needs low > 0, got 0.0"),
        ({"search.batch_size": {"choices": []}}, r"search.batch_size.choices must be a non-empty list, got \[\]"),
        ({"search.batch_size": {"choices": [0, 64]}}, r"search.batch_size: 0 is refused in every combination .*batch_size must be a positive integer"),
        ({"search.batch_size": {"low": 64, "high": 512}}, r"search.batch_size must be a choice list"),
        ({"search.learning_rate": {"low": "fast", "high": 0.1}}, r"search.learning_rate needs float low and high \(train.lr\)"),
        ({"gate.epoch": 7}, r"gate.epoch 7 is beyond scheduler.max_epochs 6, the gate would never be reached"),
        ({"gate.ratio_to_e0": -0.5}, r"gate: ratio_to_e0 must be a positive number, got -0.5"),
        ({"scheduler.reduction_factor": 1}, r"scheduler: reduction_factor must be at least 2, got 1"),
        ({"scheduler.grace_period": 9}, r"scheduler: grace_period 9 is beyond max_epochs 6"),
        ({"scheduler.patience": 3}, r"unknown key 'patience' in scheduler; scheduler takes kind, max_epochs, grace_period"),
        ({"trials": 0}, r"trials must be a positive integer, got 0"),
        ({"resources.workers": 0}, r"resources: workers must be a positive integer, got 0"),
        ({"resources.gpus_per_trial": -1}, r"resources: gpus_per_trial must be a number >= 0 or auto, got -1"),
        ({"resources.gpus_per_trial": float("nan")}, r"resources: gpus_per_trial must be a number >= 0 or auto, got nan"),
        ({"resources.gpus_per_trial": "max"}, r"resources: gpus_per_trial must be a number >= 0 or auto, got 'max'"),
        ({"resources.cpus_per_worker": "2"}, r"resources: cpus_per_worker must be a positive number, got '2'"),
        ({"resources.workers": 2, "resources.gpus_per_trial": 1}, r"resources: workers 2 with gpus_per_trial 1 is 0.5 GPU a worker, and two workers of one trial on one GPU crash NCCL \(\"Duplicate GPU detected\"\): each worker of a several-worker trial needs a whole GPU; set gpus_per_trial to 2 \(one GPU a worker\), or workers to 1 to pack trials on a GPU \(or gpus_per_trial to 0 to train on CPUs\)$"),
        ({"resources.workers": 3, "resources.gpus_per_trial": "auto"}, r"resources: workers 3 with gpus_per_trial auto packs workers by fractions of a GPU, and two workers of one trial on one GPU crash NCCL .*set gpus_per_trial to 3 \(one GPU a worker\), or workers to 1"),
        ({"search.learning_rate": {"low": 0.1, "high": 2.0}}, r"search.learning_rate: 2.0 is refused in every combination .*lr must be in \(0, 1\), got 2.0"),
        ({"search.learning_rate": {"low": 1e-4, "high": 1e-2, "log": "false"}}, r"search.learning_rate.log must be true or false, got 'false'"),
        ({"search.weight_decay": {"choices": [0.0, 1.5]}}, r"search.weight_decay: 1.5 is refused in every combination .*weight_decay must be in \[0, 1\)"),
        ({"initial": {"learning_rate": 1e-3}}, r"initial must be a list of configurations"),
        ({"initial": [{"batch_size": True}]}, r"initial\[0\].batch_size = True lies outside search.batch_size"),
        ({"train.epochs": 3}, r"train.epochs is set by scheduler.max_epochs; remove it"),
        ({"initial": [{"learning_rate": 0.5}]}, r"initial\[0\].learning_rate = 0.5 lies outside search.learning_rate"),
        ({"initial": [{"batch_size": 100}]}, r"initial\[0\].batch_size = 100 lies outside search.batch_size"),
        ({"model.headdim": 24}, r"space.yaml: model: headdim must divide expand\*d_model"),
        ({"model.d_state": 18}, r"space.yaml: model: the conv channels .* multiple of 8 for the fused kernels \(backend auto\), got 2\*32 \+ 2\*1\*18 = 100;.* or set model.backend=torch$"),
        ({"search.learning_rate": None, "initial": [], "train.lr": 2.0}, r"space.yaml: train: lr must be in \(0, 1\), got 2.0"),
        ({"name": "has space"}, r"name must be letters, digits, '-' or '_', got 'has space'"),
        ({"resources.custom": ["a100"]}, r"resources: custom must be a mapping of resource name to amount"),
        ({"resources.custom": {"GPU": 1}}, r"resources: custom: 'GPU' is not a custom resource name"),
        ({"resources.custom": {"node:__internal_head__": 1}}, r"custom: 'node:__internal_head__' is not a custom"),
        ({"resources.custom": {"a100": 0}}, r"resources: custom: a100 must be a positive number, got 0"),
        ({"resources.max_failures": -1}, r"resources: max_failures must be an integer >= 0, got -1"),
        ({"resources.max_failures": 1.5}, r"resources: max_failures must be an integer >= 0, got 1.5"),
        ({"train.device": "cuda"}, r"train.device is cuda and resources.gpus_per_trial 0 gives each trial no GPU"),
        ({"train.threads": 0}, r"space.yaml: train: threads must be a positive integer, got 0"),
        ({"gate.baseline": "arima"}, r"gate: baseline must be one of har, persistence, mean, got 'arima'"),
        ({"data.test_fraction": 0.9}, r"space.yaml: data: val_fraction \+ test_fraction must be at most 0.99"),
        ({"confirm.top_k": 9}, r"confirm.top_k 9 is more than the 8 trials of the search.*lower top_k to at most 8"),
        ({"confirm.top_k": 0}, r"confirm: top_k must be a positive integer, got 0"),
        ({"confirm.seeds": [1, 1]}, r"confirm: seeds must differ from each other, 1 is given twice"),
        ({"confirm.seeds": [0, 1]}, r"confirm.seeds holds 0, the run's own seed \(train.seed\).*extra seeds"),
        ({"confirm.seeds": "1, 2"}, r"confirm: seeds must be a list of integers, got '1, 2'"),
        ({"confirm.folds": 0}, r"confirm: folds must be a positive integer, got 0"),
        ({"confirm.rounds": 2}, r"unknown key 'rounds' in confirm; did you mean confirm.folds\?"),
    ],
)
def test_space_rejects_each_problem_with_one_clear_error(tmp_path, change, match):
    path = write(tmp_path, change)
    with pytest.raises(ConfigError, match=match) as caught:
        load_space(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "pinned"),
    [
        ({}, {"device": "cpu", "threads": 1}),
        ({"resources.cpus_per_worker": 2.5}, {"device": "cpu", "threads": 2}),  # Ray's OMP_NUM_THREADS: whole CPUs
        ({"resources.gpus_per_trial": 0.5}, {"device": "cuda", "threads": 1}),
        ({"resources.gpus_per_trial": "auto"}, {"device": "cuda", "threads": 1}),
        ({"train.threads": 4}, {"device": "cpu", "threads": 4}),
    ],
)
def test_space_pins_what_decides_a_trials_numbers(tmp_path, change, pinned):
    train = load_space(write(tmp_path, change)).run.train
    assert {"device": train.device, "threads": train.threads} == pinned
    assert (train.seed, train.precision) == (0, "fp32")


@pytest.mark.parametrize("resources", [{"workers": 2, "gpus_per_trial": 2}, {"workers": 2, "gpus_per_trial": 4},
                                       {"workers": 2, "gpus_per_trial": 0}, {"workers": 1, "gpus_per_trial": 0.25},
                                       {"workers": 1, "gpus_per_trial": "auto"}])
def test_space_takes_whole_gpus_for_several_workers_and_packing_for_one(tmp_path, resources):
    change = {f"resources.{key}": value for key, value in resources.items()}
    assert load_space(write(tmp_path, change)).resources.gpus_per_trial == resources["gpus_per_trial"]


def test_space_weight_decay_choices_may_include_zero(tmp_path):
    space = load_space(write(tmp_path, {"search.weight_decay": {"choices": [0.0, 0.01]}, "initial": []}))
    assert space.search["weight_decay"] == Choice((0.0, 0.01))


def test_space_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("name: x\nsearch: {learning_rate: {low: 1e-5\n")
    with pytest.raises(ConfigError, match=r"invalid YAML at line 3"):
        load_space(path)


def test_space_reads_exponents_without_a_dot_as_numbers(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("search:\n  learning_rate: {low: 1e-5, high: 3E-2, log: true}\n")
    assert load_space(path).search["learning_rate"] == FloatRange(1e-5, 3e-2, log=True)
