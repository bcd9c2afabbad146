"""A sweep's search space and settings, from a YAML file in search_spaces/, validated before Ray starts.

Layout (search_spaces/default.yaml is the reference):
  name, trials, seed
  search:     the settings searched, by name (learning_rate, model.d_model, data.window, ...), each a range
              {low, high, log, step} or {choices: [...]} (tuning/search/search_section.py)
  initial:    configurations evaluated first, e.g. the original system's
  scheduler:  ASHA on the epoch: max_epochs, grace_period, reduction_factor
  gate:       the milestone gate (tuning/search/gate.py): epoch, threshold / ratio_to_baseline (to the
              validation loss of baseline: har, persistence or mean) / ratio_to_e0
  resources:  workers, cpus_per_worker, gpus_per_trial (a fraction packs trials on a GPU; auto: the memory
              probe packs as many as fit, or CPUs where the cluster has no GPU), max_concurrent,
              custom (Ray resources a worker asks for), max_failures (worker failures a trial survives)
  confirm:    top_k, seeds, folds: the finalists trained again after the search (tuning/search/finalists.py)
  run:        the fixed data / model / train settings every trial shares (TrainingRecipe's sections)
Every problem is one ConfigError naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.settings import finite_number, require_positive_ints
from tuning.search.finalists import ConfirmConfig
from tuning.search.gate import GateConfig
from tuning.search.notify_config import NotifyConfig, parse_notify
from tuning.search.recipe import TrainingRecipe
from tuning.search.sample_alignment import aligned_run
from tuning.search.samplers import check_sampler, grid_trials
from tuning.search.search_section import Choice, FloatRange, IntRange, Spec, parse_search, with_searched

__all__ = ["Choice", "FloatRange", "IntRange", "SweepSpace", "load_space", "parse_space", "searched", "with_params"]
from tuning.search.searchable import is_search_key, resolve
from tuning.sweep_files import valid_name
from tuning.yaml_io import ConfigError, read_yaml

RAY_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
AUTO = "auto"  # gpus_per_trial: the memory probe decides how many trials share a GPU
TOP_LEVEL = ("name", "trials", "seed", "sampler", "search", "initial", "scheduler", "gate", "resources", "confirm",
             "run", "notify")


@dataclass(frozen=True)
class SchedulerConfig:
    max_epochs: int = 50  # every trial's epoch budget (train.epochs)
    grace_period: int = 5  # ASHA never stops a trial before this epoch
    reduction_factor: int = 3  # ASHA keeps the top 1/reduction_factor at each rung

    def __post_init__(self) -> None:
        require_positive_ints(self, ("max_epochs", "grace_period", "reduction_factor"))
        if self.reduction_factor < 2:
            raise ValueError(f"reduction_factor must be at least 2, got {self.reduction_factor}")
        if self.grace_period > self.max_epochs:
            raise ValueError(f"grace_period {self.grace_period} is beyond max_epochs {self.max_epochs}; lower it")


@dataclass(frozen=True)
class ResourceConfig:
    workers: int = 1  # Ray Train workers per trial
    cpus_per_worker: float = 1.0  # CPUs each worker takes; also its torch threads unless run.train.threads
    # Split over the workers; 0.25 packs four trials on one GPU; "auto": as many as the memory probe finds fit.
    gpus_per_trial: float | str = 0.0
    max_concurrent: int | None = None  # None: as many as the cluster's resources hold
    # Custom Ray resources each worker asks for, e.g. {a100: 1} for nodes started with
    # `ray start --resources '{"a100": 4}'`: trials then run on those nodes only.
    custom: dict[str, float] = field(default_factory=dict)
    # Worker failures (a crash, a lost node) a trial survives, each resumed from its latest checkpoint.
    # A node preemption (a spot reclaim Ray is told of) is not counted: it always resumes.
    max_failures: int = 2

    def __post_init__(self) -> None:
        require_positive_ints(self, ("workers", "max_concurrent"), optional=("max_concurrent",))
        if not isinstance(self.max_failures, int) or isinstance(self.max_failures, bool) or self.max_failures < 0:
            raise ValueError(f"max_failures must be an integer >= 0, got {self.max_failures!r}")
        if not _positive_number(self.cpus_per_worker):
            raise ValueError(f"cpus_per_worker must be a positive number, got {self.cpus_per_worker!r}")
        if not (self.gpus_per_trial == AUTO or finite_number(self.gpus_per_trial) and self.gpus_per_trial >= 0):
            raise ValueError(f"gpus_per_trial must be a number >= 0 or {AUTO}, got {self.gpus_per_trial!r}")
        if not isinstance(self.custom, dict):
            raise ValueError(f"custom must be a mapping of resource name to amount, got {self.custom!r}")
        for name, amount in self.custom.items():
            if not isinstance(name, str) or name in RAY_BUILTIN_RESOURCES or name.startswith("node:"):
                raise ValueError(f"custom: {name!r} is not a custom resource name; CPU and GPU have their own "
                                 "keys, and Ray's own resources (memory, node:...) cannot be asked for here")
            if not _positive_number(amount):
                raise ValueError(f"custom: {name} must be a positive number, got {amount!r}")


@dataclass(frozen=True)
class SweepSpace:
    name: str  # the sweep's name (default: the file's name); letters, digits, '-' and '_'
    trials: int  # search trials to run (default 16)
    seed: int  # the searcher's seed (default 0)
    search: dict[str, Spec]  # a setting to search, by its name, and its range or choices
    initial: tuple[dict[str, Any], ...]  # configurations evaluated first, e.g. the original system's
    scheduler: SchedulerConfig
    gate: GateConfig
    resources: ResourceConfig
    run: TrainingRecipe = field(default_factory=TrainingRecipe)
    confirm: ConfirmConfig | None = None  # finalists trained again (tuning/search/finalists.py); None: not
    notify: NotifyConfig | None = None  # the webhook told how the sweep ended (tuning/search/notify_config.py)
    # Optuna's sampler: tpe, random, gp, cmaes (needs the cmaes package) or grid (every entry a choice list or a
    # range with step; trials unset: the whole grid and the initial points off it). tuning/search/samplers.py
    sampler: str = "tpe"


def with_params(run: TrainingRecipe, params: dict[str, Any]) -> TrainingRecipe:
    """One trial's run configuration: the space's fixed settings with its sampled parameters set, and for
    a confirmation run (tuning/search/finalists.py) its seed and walk-forward fold."""
    run = with_searched(run, searched(params))
    if "seed" in params:
        run = run.replace("train", seed=params["seed"])
    return run.replace("data", fold=params["fold"]) if "fold" in params else run


def searches_data(space: SweepSpace) -> bool:
    """Whether the space searches a data setting (data.window, ...): each trial then builds its own Dataset."""
    return any(resolve(key).section == "data" for key in space.search)


def searched(params: dict[str, Any]) -> dict[str, Any]:
    """A trial config's searched parameters alone (a confirmation run's config holds more)."""
    return {key: value for key, value in params.items() if is_search_key(key)}


def load_space(path: str | Path) -> SweepSpace:
    """Read and validate a search-space YAML; raises ConfigError."""
    return parse_space(read_yaml(path, "search space"), str(path))


def parse_space(values: Any, source: str) -> SweepSpace:
    """Validate plain values (a parsed YAML document) into a SweepSpace."""
    top = _mapping(values, source, "the top level", TOP_LEVEL)
    name = top.get("name", Path(source).stem)
    if not valid_name(name):
        raise ConfigError(f"{source}: name must be letters, digits, '-' or '_', got {name!r}; rename it")
    seed = top.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{source}: seed must be an integer, got {seed!r}")
    scheduler = _section(SchedulerConfig, top.get("scheduler"), source, "scheduler")
    gate = _section(GateConfig, top.get("gate"), source, "gate")
    if gate.epoch > scheduler.max_epochs:
        raise ConfigError(f"{source}: gate.epoch {gate.epoch} is beyond scheduler.max_epochs {scheduler.max_epochs}, "
                          "the gate would never be reached; lower gate.epoch or raise max_epochs")
    resources = _section(ResourceConfig, top.get("resources"), source, "resources")
    run_values = top.get("run") or {}
    if isinstance(run_values, dict) and "epochs" in (run_values.get("train") or {}):
        raise ConfigError(f"{source}: run.train.epochs is set by scheduler.max_epochs; remove it from run.train")
    if isinstance(run_values, dict) and "align_window" in (run_values.get("data") or {}):
        raise ConfigError(f"{source}: run.data.align_window is set by the sweep, to the longest data.window its "
                          "trials read, so that every trial is scored on the same samples; remove it from run.data")
    run = TrainingRecipe.from_dict(run_values, source=f"{source}: run").replace("train", epochs=scheduler.max_epochs)
    run = _pinned(run, resources, source)
    search = parse_search(top.get("search"), run, source)
    run = aligned_run(search, run)  # one validation set for every trial (tuning/search/sample_alignment.py)
    points = top.get("initial") or []
    if not isinstance(points, list):
        raise ConfigError(f"{source}: initial must be a list of configurations, e.g. "
                          "[{learning_rate: 5e-5, weight_decay: 1e-4, batch_size: 512}]")
    initial = tuple(_initial(point, search, run, source, i) for i, point in enumerate(points))
    sampler = top.get("sampler", "tpe")
    # grid: each point once, and each initial point off it (tuning/search/samplers.py)
    trials = top.get("trials", grid_trials(search, initial, source) if sampler == "grid" else 16)
    _positive_int(trials, source, "trials")
    check_sampler(sampler, search, trials, source, initial)
    confirm = _confirm(top.get("confirm"), trials, run.train.seed, source)
    notify = parse_notify(top.get("notify"), source)
    return SweepSpace(name, trials, seed, search, initial, scheduler, gate, resources, run, confirm, notify, sampler)


def _confirm(values: Any, trials: int, base_seed: int, source: str) -> ConfirmConfig | None:
    if values is None:
        return None
    confirm = _section(ConfirmConfig, values, source, "confirm")
    if confirm.top_k > trials:
        raise ConfigError(f"{source}: confirm.top_k {confirm.top_k} is more than the {trials} trials of the search, "
                          f"there cannot be that many finalists; lower top_k to at most {trials}")
    if base_seed in confirm.seeds:
        raise ConfigError(f"{source}: confirm.seeds holds {base_seed}, the run's own seed (run.train.seed), which "
                          "every finalist's search trial already used; list only the extra seeds")
    return confirm


def _pinned(run: TrainingRecipe, resources: ResourceConfig, source: str) -> TrainingRecipe:
    """The run with what decides a trial's numbers written out: the device its resources give it (cpu without
    a GPU, else cuda) and its torch threads (cpus_per_worker, as Ray sets OMP_NUM_THREADS, unless the run sets
    them). Seed and precision are the run's own. So a trial's configuration, and best.yaml, reproduce it."""
    gpu = resources.gpus_per_trial
    device = "cpu" if gpu == 0 else "cuda"
    if run.train.device not in ("auto", device):
        raise ConfigError(f"{source}: run.train.device is {run.train.device} and resources.gpus_per_trial {gpu} gives "
                          f"each trial {'no GPU' if device == 'cpu' else 'a GPU'}; remove run.train.device or change "
                          "gpus_per_trial")
    threads = run.train.threads or max(1, int(resources.cpus_per_worker))
    return run.replace("train", device=device, threads=threads)


def _initial(point: Any, search: dict[str, Spec], run: TrainingRecipe, source: str, i: int) -> dict[str, Any]:
    point = _mapping(point, source, f"initial[{i}]", tuple(search))
    for key, value in point.items():
        if not _inside(value, search[key]):
            raise ConfigError(f"{source}: initial[{i}].{key} = {value!r} lies outside search.{key}; "
                              "widen the space or change the point")
    try:
        with_searched(run, point)
    except ConfigError as exc:
        raise ConfigError(f"{source}: initial[{i}] is a combination the recipe refuses ({exc}); change the point") \
            from None
    return point


def _inside(value: Any, spec: Spec) -> bool:
    if isinstance(spec, Choice):
        return any(value == c and type(value) is type(c) for c in spec.choices)
    if isinstance(spec, IntRange):
        return isinstance(value, int) and not isinstance(value, bool) and value in spec.values()
    return finite_number(value) and spec.low <= value <= spec.high


def _section(kind: type, values: Any, source: str, where: str):
    names = tuple(kind.__dataclass_fields__)
    checked = _mapping(values or {}, source, where, names)  # its ConfigError names the file once
    try:
        return kind(**checked)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {where}: {exc}") from None


def _mapping(values: Any, source: str, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: {where} must be a mapping, got {type(values).__name__}")
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in {where}; allowed: {', '.join(allowed)}")
    return values


def _positive_int(value: Any, source: str, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{source}: {where} must be a positive integer, got {value!r}")


def _positive_number(value: Any) -> bool:
    return finite_number(value) and value > 0
