"""Which settings a search space may search, by name, and what kind of values each takes.

A searched setting is named by its dotted name in the training recipe (`model.d_model`, `data.window`,
`train.warmup_fraction`) or by one of the short names of the first spaces (learning_rate, weight_decay,
batch_size: train.lr, train.weight_decay, train.batch_size). Every int, float, bool or str field of the
recipe's data, model and train sections may be searched, except:
  set by the sweep      train.epochs (scheduler.max_epochs), train.seed (its fixed value, confirm.seeds),
                        train.device and train.threads (resources), data.fold (confirm.folds),
                        data.align_window (the longest data.window searched: tuning/search/sample_alignment.py),
                        model.n_features, model.n_targets and model.residual (from the data)
  not comparable        data.target, data.horizon, data.objective, data.val_fraction, data.test_fraction,
                        data.min_val_samples: they change what the validation loss measures, in which units, or on
                        which bars, so trials that differ in them cannot be ranked by it
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from model.config import ModelConfig
from model.data import DataConfig
from model.train_config import TrainConfig
from tuning.search.nearest_names import did_you_mean

ALIASES = {"learning_rate": "train.lr", "weight_decay": "train.weight_decay", "batch_size": "train.batch_size"}
SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
RUN_SECTIONS = tuple(SECTIONS)  # a run configuration's sections
OLDER_RUN = "run"  # a space's older spelling of the run sections: run.model.d_model is model.d_model
NOT_SEARCHABLE = {
    "train.epochs": "the epoch budget is scheduler.max_epochs",
    "train.seed": "the seed is train.seed, and confirm.seeds retrains finalists on others",
    "train.device": "the device follows resources.gpus_per_trial",
    "train.threads": "the threads follow resources.cpus_per_worker",
    "data.fold": "walk-forward folds are confirm.folds",
    "data.align_window": "the sweep sets it to the longest data.window it searches (tuning/search/sample_alignment.py)",
    "data.columns": "the file's columns are data.columns (or --column)",
    "model.n_features": "it is set from the data",
    "model.n_targets": "it is set from the data",
    "model.residual": "it is set from the data (data.residual_to)",
    "data.target": "trials forecasting different targets cannot be ranked by their validation loss",
    "data.horizon": "trials forecasting different horizons cannot be ranked by their validation loss",
    "data.objective": "runs of different objectives have losses in different units, so they cannot be ranked "
                      "against each other; set it once (data.objective) and run a sweep per objective",
    "data.val_fraction": "trials validated on different bars cannot be ranked by their validation loss",
    "data.test_fraction": "it would move the untouched test segment",
    "data.min_val_samples": "it is a check of the data, not a setting of the model",
}
KINDS = (bool, int, float, str)  # bool first: a bool is an int to isinstance


@dataclass(frozen=True)
class Setting:
    """One searchable setting: where it lives in the recipe and its kind of value."""

    name: str  # its dotted name, e.g. model.d_model
    section: str  # data, model or train
    field: str  # the field of that section's config
    kind: type  # bool, int, float or str: int and float may be ranges, every kind a choice list


def resolve(key: str) -> Setting:
    """The setting a search key names (a short name or a dotted one); ValueError naming the nearest ones."""
    name = ALIASES.get(key, key)  # not run.*: a search entry has the setting's name or its short name
    if name in NOT_SEARCHABLE:
        raise ValueError(f"{key} cannot be searched: {NOT_SEARCHABLE[name]}")
    settings = searchable_settings()
    if name not in settings:
        raise ValueError(f"unknown search key {key!r}; {did_you_mean(name, [*settings, *ALIASES], ALIASES)}")
    return settings[name]


def setting_name(key: str) -> str:
    """A setting's one dotted name for any name of it: learning_rate -> train.lr, run.model.d_model ->
    model.d_model (a space's older spelling), model.d_model -> itself; spaces around its names dropped."""
    names = [name.strip() for name in key.split(".")]
    if len(names) > 2 and names[0] == OLDER_RUN and names[1] in RUN_SECTIONS:
        names = names[1:]
    return ALIASES.get(".".join(names)) or ".".join(names)


def names_of(name: str) -> tuple[str, ...]:
    """Every name a setting goes by: train.batch_size -> (train.batch_size, batch_size); model.d_model -> itself."""
    name = setting_name(name)
    return (name, *(short for short, full in ALIASES.items() if full == name))


def value_of_setting(params: dict[str, Any], name: str, default: Any = None) -> Any:
    """The value of setting `name` among a trial's params under any of its names (learning_rate or train.lr)."""
    return next((params[key] for key in names_of(name) if key in params), default)


def is_search_key(key: str) -> bool:
    """Whether a trial config's key is a searched setting (a confirmation run's config holds seed and fold too)."""
    return key in ALIASES or "." in key


def searchable_settings() -> dict[str, Setting]:
    """Every searchable setting by its dotted name, in the sections' field order."""
    settings = {}
    for section, config in SECTIONS.items():
        hints = typing.get_type_hints(config)
        for field in dataclasses.fields(config):
            name, kind = f"{section}.{field.name}", _kind(hints[field.name])
            if kind is not None and name not in NOT_SEARCHABLE:
                settings[name] = Setting(name, section, field.name, kind)
    return settings


def _kind(hint: typing.Any) -> type | None:
    """bool, int, float or str for a field of that type (or that type or None), else None (lists, mappings)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is typing.Union \
        or type(hint).__name__ == "UnionType" else [hint]
    return args[0] if len(args) == 1 and args[0] in KINDS else None
