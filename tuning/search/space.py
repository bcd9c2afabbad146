"""A sweep's search space and settings, from a YAML file in search_spaces/, validated before Ray starts.

Layout (search_spaces/default.yaml is the reference):
  name, trials, seed
  search:     the settings searched, by name (learning_rate, model.d_model, data.window, ...), each a range
              {low, high, log, step} or {choices: [...]} (tuning/search/search_section.py)
  initial:    configurations evaluated first, e.g. the original system's
  scheduler:  the stopping rule (kind: asha, hyperband, median or none) and its settings: max_epochs,
              grace_period, reduction_factor, brackets, min_samples (tuning/search/scheduler_config.py)
  gate:       the milestone gate (tuning/search/gate.py): epoch, threshold / ratio_to_baseline (to the
              validation loss of baseline: har, persistence or mean) / ratio_to_e0
  resources:  workers, cpus_per_worker, gpus_per_trial (a fraction packs trials on a GPU; auto: the memory
              probe packs as many as fit, or CPUs where the cluster has no GPU), max_concurrent,
              custom (Ray resources a worker asks for), max_failures (worker failures a trial survives),
              trial_path (auto, fast or public: tuning/sweep/trial_path.py)
  confirm:    top_k, seeds, folds: the finalists trained again after the search (tuning/search/finalists.py)
  data, model, train: the fixed settings every trial shares (TrainingRecipe's sections), e.g. model.d_model
  run:        the older spelling of data / model / train: run.model.d_model IS model.d_model; a setting given in
              both spellings, or both fixed and searched, is refused
Every problem is one ConfigError naming the file and the key; an unknown key names the nearest known ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.settings import finite_number, require_positive_ints
from tuning.search.finalists import ConfirmConfig
from tuning.search.gate import GateConfig
from tuning.search.nearest_names import LISTED_BY, did_you_mean
from tuning.search.notify_config import NotifyConfig, parse_notify
from tuning.search.recipe import SECTIONS, TrainingRecipe, recipe_setting_names
from tuning.search.sample_alignment import aligned_run
from tuning.search.samplers import check_sampler, grid_trials
from tuning.search.scheduler_config import SchedulerConfig, scheduler_values
from tuning.search.search_section import Choice, FloatRange, IntRange, Spec, parse_search, with_searched

__all__ = ["Choice", "FloatRange", "IntRange", "SchedulerConfig", "SweepSpace", "load_space", "parse_space", "searched",
           "with_params"]
from tuning.search.searchable import ALIASES, OLDER_RUN, is_search_key, names_of, resolve
from tuning.sweep_files import valid_name
from tuning.yaml_io import ConfigError, read_yaml

TRIAL_PATHS = ("auto", "fast", "public")  # resources.trial_path (tuning/sweep/trial_path.py)
RAY_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
AUTO = "auto"  # gpus_per_trial: the memory probe decides how many trials share a GPU
# A setting whose fixed value still counts while it is searched: data.window is the shared Dataset's window and
# the shortest every trial's samples are aligned to (tuning/search/sample_alignment.py)
FIXED_WHILE_SEARCHED = ("data.window",)
TOP_LEVEL = ("name", "trials", "seed", "sampler", "search", "initial", "scheduler", "gate", "resources", "confirm",
             *SECTIONS, "notify", OLDER_RUN)


@dataclass(frozen=True)
class ResourceConfig:
    workers: int = 1  # Ray Train workers per trial
    cpus_per_worker: float = 1.0  # CPUs each worker takes; also its torch threads unless train.threads
    # Split over the workers; 0.25 packs four trials on one GPU; "auto": as many as the memory probe finds fit.
    # Packing (below 1 GPU a worker, or auto) takes workers: 1; several workers (DDP over NCCL) each need a whole GPU.
    gpus_per_trial: float | str = 0.0
    max_concurrent: int | None = None  # None: as many as the cluster's resources hold
    # Custom Ray resources each worker asks for, e.g. {a100: 1} for nodes started with
    # `ray start --resources '{"a100": 4}'`: trials then run on those nodes only.
    custom: dict[str, float] = field(default_factory=dict)
    # Worker failures (a crash, a lost node) a trial survives, each resumed from its latest checkpoint.
    # A node preemption (a spot reclaim Ray is told of) is not counted, from Ray 2.58 on (an older Ray counts it).
    max_failures: int = 2
    # How each trial runs under Ray Train: auto (fast where the Ray installed has the private hooks the fast path
    # needs, else Ray's public API), fast, or public; the sweep's `trial path:` line says which and why.
    trial_path: str = "auto"

    def __post_init__(self) -> None:
        require_positive_ints(self, ("workers", "max_concurrent"), optional=("max_concurrent",))
        if not isinstance(self.max_failures, int) or isinstance(self.max_failures, bool) or self.max_failures < 0:
            raise ValueError(f"max_failures must be an integer >= 0, got {self.max_failures!r}")
        if not _positive_number(self.cpus_per_worker):
            raise ValueError(f"cpus_per_worker must be a positive number, got {self.cpus_per_worker!r}")
        if not (self.gpus_per_trial == AUTO or finite_number(self.gpus_per_trial) and self.gpus_per_trial >= 0):
            raise ValueError(f"gpus_per_trial must be a number >= 0 or {AUTO}, got {self.gpus_per_trial!r}")
        if self.trial_path not in TRIAL_PATHS:
            raise ValueError(f"trial_path must be one of {', '.join(TRIAL_PATHS)}, got {self.trial_path!r}")
        if self.workers > 1 and (self.gpus_per_trial == AUTO or 0 < self.gpus_per_trial / self.workers < 1):
            share = ("packs workers by fractions of a GPU" if self.gpus_per_trial == AUTO else
                     f"is {self.gpus_per_trial / self.workers:g} GPU a worker")
            raise ValueError(f"workers {self.workers} with gpus_per_trial {self.gpus_per_trial} {share}, and two "
                             "workers of one trial on one GPU crash NCCL (\"Duplicate GPU detected\"): each worker of "
                             f"a several-worker trial needs a whole GPU; set gpus_per_trial to {self.workers} (one GPU "
                             "a worker), or workers to 1 to pack trials on a GPU (or gpus_per_trial to 0 to train on "
                             "CPUs)")
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


def default_name(path: str | Path) -> str:
    """A space's name where it gives none: its file's name (search_spaces/smoke.yaml -> smoke)."""
    return Path(path).stem


def parse_space(values: Any, source: str, stored: bool = False, name: str | None = None) -> SweepSpace:
    """Validate plain values (a parsed YAML document) into a SweepSpace. `stored`: the space a sweep keeps in its
    sweep.json, read to resume, list or report it: a setting both fixed and searched, or searched under two names,
    which earlier versions accepted, is read as it was run, not refused. `name`: the space's name where it gives
    none (default_name of its file; else `source` is taken for the file's path)."""
    top = _mapping(values, source, "the top level", TOP_LEVEL)
    name = top.get("name", name or default_name(source))
    if not valid_name(name):
        raise ConfigError(f"{source}: name must be letters, digits, '-' or '_', got {name!r}; rename it")
    seed = top.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{source}: seed must be an integer, got {seed!r}")
    scheduler = _section(SchedulerConfig, scheduler_values(top.get("scheduler"), source), source, "scheduler")
    gate = _section(GateConfig, top.get("gate"), source, "gate")
    if gate.epoch > scheduler.max_epochs:
        raise ConfigError(f"{source}: gate.epoch {gate.epoch} is beyond scheduler.max_epochs {scheduler.max_epochs}, "
                          "the gate would never be reached; lower gate.epoch or raise max_epochs")
    resources = _section(ResourceConfig, top.get("resources"), source, "resources")
    run_values = merged_run(top, source)
    if "epochs" in run_values.get("train", {}):
        raise ConfigError(f"{source}: {_spelled(top, 'train', 'epochs')} is set by scheduler.max_epochs; remove it")
    if "align_window" in run_values.get("data", {}):
        raise ConfigError(f"{source}: {_spelled(top, 'data', 'align_window')} is set by the sweep, to the longest "
                          "data.window its trials read, so that every trial is scored on the same samples; remove it")
    run = TrainingRecipe.from_dict(run_values, source=source).replace("train", epochs=scheduler.max_epochs)
    run = _pinned(run, resources, source)
    search = parse_search(top.get("search"), run, source, stored)
    if not stored:
        _require_not_fixed(search, top, run_values, source)
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


def merged_run(top: dict[str, Any], source: str) -> dict[str, Any]:
    """The run settings of a space's top level as TrainingRecipe.from_dict reads them: its data, model and train
    sections with those of `run:` (their older spelling) merged in; ConfigError for a setting given in both."""
    older = top.get(OLDER_RUN) or {}
    if not isinstance(older, dict):
        raise ConfigError(f"{source}: run must be a mapping of data, model and train (the older spelling of the "
                          "top-level sections data, model and train)")
    unknown = sorted(str(key) for key in set(older) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in run, the older spelling of the sections data, "
                          f"model and train; {did_you_mean(unknown[0], space_setting_names(), ALIASES)}")
    merged: dict[str, Any] = {}
    for section in SECTIONS:
        newer, old = top.get(section), older.get(section)
        for values, where in ((newer, section), (old, f"{OLDER_RUN}.{section}")):
            if values is not None and not isinstance(values, dict):
                raise ConfigError(f"{source}: {where} must be a mapping of settings, e.g. {section}: {{...}}")
        newer, old = newer or {}, old or {}
        for key in newer:
            if key in old:
                raise ConfigError(f"{source}: {section}.{key} is given twice, as {section}.{key} and "
                                  f"{OLDER_RUN}.{section}.{key}; keep one")
        if newer or old:
            merged[section] = {**old, **newer}
    return merged


def space_setting_names() -> list[str]:
    """Every key a space accepts by its full dotted name (scheduler.max_epochs, model.d_model, ...) and the short
    names of some run settings (learning_rate): the names an unknown key is matched against."""
    sections = {"scheduler": SchedulerConfig, "gate": GateConfig, "resources": ResourceConfig,
                "confirm": ConfirmConfig, "notify": NotifyConfig}
    return [*(key for key in TOP_LEVEL if key not in (*sections, *SECTIONS, OLDER_RUN)),
            *(f"{name}.{field}" for name, kind in sections.items() for field in kind.__dataclass_fields__),
            *recipe_setting_names(), *ALIASES]


def _spelled(top: dict[str, Any], section: str, key: str) -> str:
    """A run setting's name as the space gives it: model.d_model, or run.model.d_model in the older spelling."""
    given = top.get(section)
    return f"{section}.{key}" if isinstance(given, dict) and key in given else f"{OLDER_RUN}.{section}.{key}"


def _require_not_fixed(search: dict[str, Spec], top: dict[str, Any], run_values: dict[str, Any], source: str) -> None:
    """ConfigError for a setting both searched and fixed: the fixed value would be silently overridden."""
    for key in search:
        setting = resolve(key)
        if setting.name in FIXED_WHILE_SEARCHED:
            continue
        if setting.field in run_values.get(setting.section, {}):
            raise ConfigError(f"{source}: {setting.name} is searched (search.{key}) and fixed "
                              f"({_spelled(top, setting.section, setting.field)}); a searched setting takes its "
                              "values from search; remove one")


def _confirm(values: Any, trials: int, base_seed: int, source: str) -> ConfirmConfig | None:
    if values is None:
        return None
    confirm = _section(ConfirmConfig, values, source, "confirm")
    if confirm.top_k > trials:
        raise ConfigError(f"{source}: confirm.top_k {confirm.top_k} is more than the {trials} trials of the search, "
                          f"there cannot be that many finalists; lower top_k to at most {trials}")
    if base_seed in confirm.seeds:
        raise ConfigError(f"{source}: confirm.seeds holds {base_seed}, the run's own seed (train.seed), which "
                          "every finalist's search trial already used; list only the extra seeds")
    return confirm


def _pinned(run: TrainingRecipe, resources: ResourceConfig, source: str) -> TrainingRecipe:
    """The run with what decides a trial's numbers written out: the device its resources give it (cpu without
    a GPU, else cuda) and its torch threads (cpus_per_worker, as Ray sets OMP_NUM_THREADS, unless the run sets
    them). Seed and precision are the run's own. So a trial's configuration, and best.yaml, reproduce it."""
    gpu = resources.gpus_per_trial
    device = "cpu" if gpu == 0 else "cuda"
    if run.train.device not in ("auto", device):
        raise ConfigError(f"{source}: train.device is {run.train.device} and resources.gpus_per_trial {gpu} gives "
                          f"each trial {'no GPU' if device == 'cpu' else 'a GPU'}; remove train.device or change "
                          "gpus_per_trial")
    threads = run.train.threads or max(1, int(resources.cpus_per_worker))
    return run.replace("train", device=device, threads=threads)


def _initial(point: Any, search: dict[str, Spec], run: TrainingRecipe, source: str, i: int) -> dict[str, Any]:
    """The point with each setting under its search entry's key (a point may name a searched setting by either of
    its names: learning_rate or train.lr); ConfigError for a setting not searched, given twice or outside."""
    if not isinstance(point, dict):
        raise ConfigError(f"{source}: initial[{i}] must be a mapping, got {type(point).__name__}")
    names = {name: key for key in search for name in names_of(resolve(key).name)}  # {train.lr: learning_rate, ...}
    names.update({key: key for key in search})  # each entry under its own key (a stored space may have two)
    named: dict[str, str] = {}
    for key in point:
        if key not in names:
            raise ConfigError(f"{source}: unknown key {key!r} in initial[{i}], which takes the searched settings; "
                              f"{did_you_mean(str(key), list(names), ALIASES, 'the search section lists them')}")
        if names[key] in named:
            raise ConfigError(f"{source}: initial[{i}] gives {resolve(names[key]).name} twice, as {named[names[key]]} "
                              f"and {key}; keep one")
        named[names[key]] = key
    point = {names[key]: value for key, value in point.items()}
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
    unknown = sorted(str(key) for key in set(values) - set(allowed))
    if unknown:
        given = next(key for key in values if str(key) == unknown[0])
        full = _dotted(given, values[given], where)
        if where == "the top level":  # else a section's name (schedulr: scheduler), else where all are listed
            listed = did_you_mean(full, allowed, listed_by=LISTED_BY)
        else:
            listed = f"{where} takes {', '.join(allowed)}"
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in {where}; "
                          f"{did_you_mean(full, space_setting_names(), ALIASES, listed)}")
    return values


def _dotted(key: Any, value: Any, where: str) -> str:
    """An unknown key as the dotted name it was meant to be matched by: schedulr: {max_epochs: 1} at the top level ->
    schedulr.max_epochs (so that it is near scheduler.max_epochs); gate.epochs -> gate.epochs."""
    full = str(key) if where == "the top level" else f"{where}.{key}"
    if isinstance(value, dict) and len(value) >= 1:
        inner = next(iter(value))
        return _dotted(inner, value[inner], full) if isinstance(inner, str) else full
    return full


def _positive_int(value: Any, source: str, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{source}: {where} must be a positive integer, got {value!r}")


def _positive_number(value: Any) -> bool:
    return finite_number(value) and value > 0
