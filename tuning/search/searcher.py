"""Optuna's sampler (TPE by default) behind Ray Tune, with an RDB study and honest trial states.

Ray's OptunaSearch tells Optuna every finished trial as COMPLETE with its last value, so
a trial ASHA stopped at epoch 1 looks like a finished one with a poor score, which
misleads TPE. Here a trial's state follows why it ended (tuning/search/gate.py's stop_reason):
  completed        COMPLETE, value = its best val_loss
  asha, gate       PRUNED, its intermediate value at each epoch its best val_loss so far, the
                   figure ASHA ranks it by; Optuna keeps the last one as the trial's value
  nan, error       FAIL (Optuna's own rule for a non-finite objective)
  invalid          PRUNED, no value: a sampled combination the recipe refuses, ended before any worker started
  lost             FAIL: started by a driver killed before Ray Tune saved it (fail_lost_trials)
and each Optuna trial carries user attributes stop_reason, stop_epoch and ray_trial_id. ray_trial_id is set as
the trial is asked for, before Ray Train starts: a lost trial names the folder its run may have left in the
sweep's storage (train/<ray_trial_id>).
The study lives in SQLite (or any RDB URL): it outlives the sweep and opens in
optuna-dashboard.
"""

from __future__ import annotations

import contextlib
import math
import random
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch

from tuning.search.gate import stop_reason
from tuning.search.samplers import grid_points, holds
from tuning.search.search_section import Spec
from tuning.search.space import Choice, IntRange, SweepSpace

STATES = {"completed": TrialState.COMPLETE, "asha": TrialState.PRUNED, "gate": TrialState.PRUNED,
          "nan": TrialState.FAIL, "error": TrialState.FAIL,
          "invalid": TrialState.PRUNED}  # a combination the recipe refuses: not a failure (Optuna's FAIL is retried)


def optuna_space(space: SweepSpace) -> dict[str, BaseDistribution]:
    """The search section as Optuna distributions."""
    return {key: CategoricalDistribution(spec.choices) if isinstance(spec, Choice)
            else IntDistribution(spec.low, spec.high, log=spec.log, step=spec.step) if isinstance(spec, IntRange)
            else FloatDistribution(spec.low, spec.high, log=spec.log, step=spec.step)
            for key, spec in space.search.items()}


def make_searcher(space: SweepSpace, storage_url: str, study_name: str, initial: bool = True) -> StateAwareOptunaSearch:
    """The space's seeded sampler (TPE unless it names another: tuning/search/samplers.py) over the space;
    the `initial` points are evaluated first (unless `initial` is False: an
    extension of a sweep, whose study holds them already and whose TPE learns from every trial it holds)."""
    sampler = make_sampler(space.sampler, space.search, space.trials, space.seed)
    return StateAwareOptunaSearch(
        space=optuna_space(space), metric="val_loss", mode="min", sampler=sampler, study_name=study_name,
        storage=optuna.storages.RDBStorage(storage_url),
        points_to_evaluate=([dict(p) for p in space.initial] or None) if initial else None,
        space_config=space,
    )


def make_sampler(name: str, search: dict[str, Spec], trials: int, seed: int) -> optuna.samplers.BaseSampler:
    """The seeded Optuna sampler the space names (its values were checked when the space was loaded)."""
    startup = max(2, min(10, trials // 4))  # random trials before a model-based sampler takes over
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=startup, warn_independent_sampling=False)
    if name == "grid":
        return SweepGridSampler(grid_points(search), seed=seed)
    return optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=startup,
        multivariate=True, constant_liar=True,  # several trials run at once: do not sample the same point twice
    )


class SweepGridSampler(optuna.samplers.BaseSampler):
    """Every point of the grid once, asked and told by Ray Tune's searcher with no `study.optimize` running (the
    space's trial count ends the search). A trial takes the first point, in an order the seed shuffles, that no
    other trial of the study holds: one that ran, one running, an enqueued `initial` point still waiting (Optuna's
    fixed params; a trial lost to a killed driver holds nothing). So an initial point on the grid runs once, as
    itself, and every other point once. (Optuna's GridSampler gives trial n the grid's point n whatever an
    enqueued trial holds: a 2x2 grid with one initial point ran one point twice and another never.) An enqueued
    point that leaves settings out takes a free point that agrees with it. Past the grid (a sweep extended beyond
    it) the point held by fewest trials is given again."""

    def __init__(self, points: list[dict[str, Any]], seed: int) -> None:
        self.points = list(points)  # every combination (tuning/search/samplers.py's grid_points)
        random.Random(seed).shuffle(self.points)
        self.chosen: dict[int, dict[str, Any]] = {}  # trial number -> its point, while its settings are asked

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: BaseDistribution) -> Any:
        if trial.number not in self.chosen:
            self.chosen = {trial.number: self._free_point(study, trial)}  # the trials before it hold theirs now
        return self.chosen[trial.number][param_name]

    def _free_point(self, study: Any, trial: Any) -> dict[str, Any]:
        held = [{**t.system_attrs.get("fixed_params", {}), **t.params} for t in study.get_trials(deepcopy=False)
                if t.number != trial.number and t.user_attrs.get("stop_reason") != "lost"]
        fixed = trial.system_attrs.get("fixed_params", {})
        candidates = [p for p in self.points if holds(fixed, p, partly=True)] or self.points
        return min(candidates, key=lambda point: sum(holds(values, point) for values in held))  # first of the least


class StateAwareOptunaSearch(OptunaSearch):
    def __init__(self, *, space_config: SweepSpace, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate, self.max_epochs = space_config.gate, space_config.scheduler.max_epochs
        self._ot_study.set_user_attr("sampler", space_config.sampler)  # which sampler chose the study's trials
        self.reported: set[tuple[str, int]] = set()  # (trial, epoch): a resumed trial may repeat an epoch

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        config = super().suggest(trial_id)
        if trial_id in self._ot_trials:  # asked for now (not a finished search's None)
            self._ot_trials[trial_id].set_user_attr("ray_trial_id", trial_id)
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if trial_id in self._completed_trials or not math.isfinite(result["val_loss"]):
            return
        if (trial_id, result["epoch"]) not in self.reported:
            with contextlib.suppress(UpdateFinishedTrialError):  # told already, before an unsaved interruption
                self._ot_trials[trial_id].report(result["best_val_loss"], step=result["epoch"])  # step: epoch
            self.reported.add((trial_id, result["epoch"]))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        if trial_id in self._completed_trials:
            return
        if result and "epoch" in result:  # a result that stopped the trial reaches only this method
            self.on_trial_result(trial_id, result)
        trial = self._ot_trials[trial_id]
        if self._ot_study._storage.get_trial(trial._trial_id).state.is_finished():  # told by a driver since killed
            self._completed_trials.add(trial_id)
            return
        reason, epoch = stop_reason(self.gate, self.max_epochs, result, error)
        with contextlib.suppress(UpdateFinishedTrialError):
            # ray_trial_id again: a trial asked for by an older version, before suggest set it
            for key, value in (("stop_reason", reason), ("stop_epoch", epoch), ("ray_trial_id", trial_id)):
                trial.set_user_attr(key, value)
        state = STATES[reason]
        value = result["best_val_loss"] if state == TrialState.COMPLETE else None
        with contextlib.suppress(UpdateFinishedTrialError):
            self._ot_study.tell(trial, value, state=state)
        self._completed_trials.add(trial_id)


def fail_lost_trials(storage_url: str, study_name: str) -> int:
    """Tell FAIL (stop_reason `lost`) the study's trials still RUNNING once the sweep has ended; returns how many.

    A driver killed outright (SIGKILL) can leave Optuna trials that Ray Tune had not saved yet:
    `resume` never runs them, so nothing else would ever end them.
    """
    study = optuna.load_study(study_name=study_name, storage=storage_url)
    lost = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for frozen in lost:
        optuna.trial.Trial(study, frozen._trial_id).set_user_attr("stop_reason", "lost")
        study.tell(frozen.number, state=TrialState.FAIL)
    return len(lost)

