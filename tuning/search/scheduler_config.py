"""A space's `scheduler:` section: which rule stops a trial early, and its settings.

  kind: asha (default) | hyperband | median | none
  max_epochs        every kind: each trial's epoch budget
  grace_period      asha, hyperband, median: no trial is stopped before this epoch
  reduction_factor  asha, hyperband: the top 1/reduction_factor of a rung go on
  brackets          hyperband: Hyperband's brackets, each with its first rung a reduction_factor further on; not
                    written: DEFAULT_BRACKETS, or the most that have a rung where fewer do
  min_samples       median: the other trials a trial is compared with, at least
The gate and a non-finite loss stop a trial under every kind (tuning/search/gate.py); the rules themselves are
tuning/search/schedulers/. A setting a space writes that its kind does not take is refused, so that a space never
says something the sweep ignores; a setting written as null is left out (`--set scheduler.reduction_factor=null`).
Plain data: no Ray here (a space is read before Ray starts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from model.settings import require_positive_ints
from tuning.yaml_io import ConfigError

KINDS = ("asha", "hyperband", "median", "none")
ALWAYS = ("kind", "max_epochs")  # the settings every kind takes
TAKES = {  # kind -> the settings it takes besides ALWAYS
    "asha": ("grace_period", "reduction_factor"),
    "hyperband": ("grace_period", "reduction_factor", "brackets"),
    "median": ("grace_period", "min_samples"),
    "none": (),
}
DEFAULT_BRACKETS = 3  # hyperband's brackets where the space does not write them (fewer where fewer have a rung)
NAMES = {"asha": "ASHA", "hyperband": "Hyperband", "median": "median stopping rule", "none": "no early stopping"}


@dataclass(frozen=True)
class SchedulerConfig:
    kind: str = "asha"  # the stopping rule: asha, hyperband (Ray's, several brackets), median (Ray's), none
    max_epochs: int = 50  # every trial's epoch budget (train.epochs); every kind
    grace_period: int = 5  # no trial is stopped before this epoch (asha, hyperband, median)
    reduction_factor: int = 3  # the top 1/reduction_factor go on at each rung (asha, hyperband)
    # Hyperband's brackets, each with its first rung reduction_factor times later; null: 3, or the most that have a
    # rung where fewer do (hyperband)
    brackets: int | None = None
    min_samples: int = 3  # the other trials a trial's best is compared with, at least (median)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        require_positive_ints(self, ("max_epochs", "grace_period", "reduction_factor", "brackets", "min_samples"),
                              optional=("brackets",))
        if self.reduction_factor < 2:
            raise ValueError(f"reduction_factor must be at least 2, got {self.reduction_factor}")
        if self.takes("grace_period") and self.grace_period > self.max_epochs:
            raise ValueError(f"grace_period {self.grace_period} is beyond max_epochs {self.max_epochs}; lower it")
        if self.kind == "hyperband":
            self._resolve_brackets()

    def _resolve_brackets(self) -> None:
        """Hyperband's brackets: as written, refused where some would have no rung; not written (None), the most
        that have one, up to DEFAULT_BRACKETS. The resolved count is the field's value from here on, so the rule,
        describe(), to_dict() (MLflow's params, `space show`) and a resumed sweep's rebuild all read the same."""
        most = self.most_brackets()
        if self.brackets is None:
            object.__setattr__(self, "brackets", min(DEFAULT_BRACKETS, most))
        elif self.brackets > most:
            raise ValueError(
                f"brackets {self.brackets}: with grace_period {self.grace_period}, reduction_factor "
                f"{self.reduction_factor} and max_epochs {self.max_epochs} only {most} have a rung (bracket s starts "
                f"at grace_period * reduction_factor^s, which must not pass max_epochs); lower brackets to at most "
                f"{most}, leave it out (the most that fit, up to {DEFAULT_BRACKETS}) or raise max_epochs")

    def takes(self, name: str) -> bool:
        """Whether this kind reads the setting `name`."""
        return name in ALWAYS or name in TAKES[self.kind]

    def rung_count(self, bracket: int) -> int:
        """The rungs Ray's AsyncHyperBandScheduler gives bracket `bracket` (0: ASHA's), by its own formula:
        int(log(max_epochs / grace_period) / log(reduction_factor) - bracket + 1)."""
        return int(math.log(self.max_epochs / self.grace_period) / math.log(self.reduction_factor) - bracket + 1)

    def most_brackets(self) -> int:
        """The brackets Ray's AsyncHyperBandScheduler gives a rung each: bracket 0's rung count."""
        return self.rung_count(0)

    def to_dict(self) -> dict[str, Any]:
        """The settings this kind takes, as a space writes them (`space show`: read back, an equal config)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if self.takes(f.name)}

    def describe(self) -> str:
        """The stopping rule in a few words, for the sweep's `stopping: ...` line."""
        if self.kind == "none":
            return f"none (every trial runs to {self.max_epochs} epochs)"
        settings = {"brackets": f"{self.brackets} brackets", "grace_period": f"grace {self.grace_period}",
                    "reduction_factor": f"reduction {self.reduction_factor}",
                    "min_samples": f"min samples {self.min_samples}"}
        shown = [text for name, text in settings.items() if self.takes(name)]
        return f"{NAMES[self.kind]} ({', '.join(shown)}, max {self.max_epochs} epochs)"


def kind_taking(name: str) -> str:
    """The first kind that takes the setting `name` (the default kind for one every kind takes)."""
    return next(kind for kind in KINDS if name in ALWAYS or name in TAKES[kind])


def scheduler_values(values: Any, source: str) -> Any:
    """A space's `scheduler:` mapping with a setting written null that its kind does not take left out; ConfigError
    for one written with a value. Anything else (not a mapping, an unknown kind or key) is left to the parser."""
    if not isinstance(values, dict):
        return values
    kind = values.get("kind", SchedulerConfig.kind)
    if kind not in KINDS:
        return values
    known = {f.name for f in fields(SchedulerConfig)}
    for name, value in values.items():
        if name in known and value is not None and name not in ALWAYS and name not in TAKES[kind]:
            takers = ", ".join(k for k in KINDS if name in TAKES[k])
            raise ConfigError(f"{source}: scheduler.{name} is set, and scheduler.kind {kind} does not take it (only "
                              f"{takers} do{'es' if ',' not in takers else ''}); remove it, or "
                              f"--set scheduler.{name}=null")
    return {name: value for name, value in values.items()
            if not (name in known and value is None and name not in ALWAYS and name not in TAKES[kind])}
