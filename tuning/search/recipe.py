"""TrainingRecipe: a training run's whole configuration (data, model, train) as one YAML file.

(Named so as not to be confused with Ray's `ray.train.RunConfig` / `ray.tune.RunConfig`.)

The format `mamba-tune train --config` reads, that a training run writes to its output
folder, and that a sweep exports for its best trial.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from model.atomic import write_text_atomic
from model.config import ModelConfig
from model.data import DataConfig
from model.train_config import TrainConfig
from tuning.search.nearest_names import did_you_mean
from tuning.search.searchable import ALIASES
from tuning.yaml_io import ConfigError, read_yaml

__all__ = ["ConfigError", "TrainingRecipe", "SECTIONS", "Tuned", "recipe_setting_names"]

SECTIONS = ("data", "model", "train")
SECTION_KINDS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
TUNED = "tuned"  # an optional section: where a sweep's best.yaml came from


@dataclass(frozen=True)
class Tuned:
    """The sweep trial a configuration is the winner of (best.yaml's `tuned:` section); `refit` once a
    `train --refit` run trains it on the training and validation segments together."""

    sweep: str
    trial: str
    best_epoch: int  # the trial's best epoch: where `train` of it stops, its train.epochs schedule unchanged
    best_val_loss: float
    refit: bool = False
    data_sha256: str | None = None  # the bars file the sweep ran on (tuning/bars_file.py): a refit takes no other
    unconfirmed: bool = False  # chosen by `best --unconfirmed`, with confirmation runs missing
    stop_epoch: int | None = None  # where `train` stops instead of best_epoch (its --epochs); None: best_epoch

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Tuned:
        tuned = cls(**values)
        for name in ("best_epoch", "stop_epoch"):
            value = getattr(tuned, name)
            if (value is not None or name == "best_epoch") and (
                    not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        return tuned

    @property
    def last_epoch(self) -> int:
        """The last epoch `train` of it trains: stop_epoch when given, else the trial's best epoch."""
        return self.stop_epoch or self.best_epoch

    def to_dict(self) -> dict[str, Any]:
        """The section as written: data_sha256, unconfirmed and stop_epoch only when set (the keys earlier versions
        wrote)."""
        values = dataclasses.asdict(self)
        return {k: v for k, v in values.items() if not (k in ("data_sha256", "unconfirmed", "stop_epoch") and not v)}


@dataclass(frozen=True)
class TrainingRecipe:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    tuned: Tuned | None = None  # a sweep's winner: where it came from

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> TrainingRecipe:
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: the top level must be a mapping with sections {', '.join(SECTIONS)}")
        unknown = sorted(set(values) - {*SECTIONS, TUNED})
        if unknown:
            raise ConfigError(f"{source}: unknown key {unknown[0]!r} at the top level, whose sections are "
                              f"{', '.join(SECTIONS)}; {did_you_mean(unknown[0], recipe_setting_names(), ALIASES)}")
        parts = {}
        for name, kind in SECTION_KINDS.items():
            section = values.get(name) or {}
            if not isinstance(section, dict):
                raise ConfigError(f"{source}: section {name!r} must be a mapping of settings")
            _require_known(name, section, source)
            try:
                parts[name] = kind.from_dict(section)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{source}: {name}: {exc}") from None
        if values.get(TUNED) is not None:
            try:
                parts[TUNED] = Tuned.from_dict(values[TUNED])
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{source}: {TUNED}: {exc}") from None
        return cls(**parts)

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainingRecipe:
        return cls.from_dict(read_yaml(path, "config") or {}, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        sections = {"data": self.data.to_dict(), "model": self.model.to_dict(), "train": self.train.to_dict()}
        return {**sections, **({TUNED: self.tuned.to_dict()} if self.tuned is not None else {})}

    def replace(self, section: str, **changes: Any) -> TrainingRecipe:
        """A copy with some settings of one section changed (validated)."""
        try:
            return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{section}: {exc}") from None

    def write_yaml(self, path: str | Path, command: str, notes: tuple[str, ...] = ()) -> None:
        """Write atomically, with a header giving the command that runs it (and `notes`, one comment line each)."""
        body = yaml.safe_dump(self.to_dict(), sort_keys=False)
        extra = "".join(f"# {note}\n" for note in notes)
        text = f"# mamba-tune run configuration. Run it with:\n#   {command}\n{extra}{body}"
        write_text_atomic(path, text)


def recipe_setting_names() -> list[str]:
    """Every setting of a run configuration by its dotted name: data.window, model.d_model, train.lr, ..."""
    return [f"{section}.{field.name}" for section, kind in SECTION_KINDS.items() for field in dataclasses.fields(kind)]


def _require_known(section: str, values: dict[str, Any], source: str) -> None:
    """ConfigError naming the first key of `section` its config does not have, and the nearest dotted names."""
    fields = {field.name for field in dataclasses.fields(SECTION_KINDS[section])}
    unknown = sorted(str(key) for key in set(values) - fields)
    if unknown:
        key = f"{section}.{unknown[0]}"
        raise ConfigError(f"{source}: unknown key {key}; {did_you_mean(key, recipe_setting_names(), ALIASES)}")
