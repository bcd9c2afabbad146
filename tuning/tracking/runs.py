"""A sweep in MLflow: one experiment per sweep name, a parent run for the sweep, a nested run per trial.

    experiment <sweep name>
      run "<name> sweep"          params: sweep settings, search space, data summary, validation
        (mamba_tune.role=sweep,   baselines (baseline.har_<objective>, .persistence_<objective>, .mean_<objective>)
         mamba_tune.objective)
                                  artifacts: space.yaml, data.json; when it ends: leaderboard.json,
                                  best.yaml, val_loss_curves.png, val_loss_by_hyperparameter.png
                                  metrics: best_val_loss_<objective> and trials_finished, step = trials
                                  finished; once confirmed, the winner's look at the test segment
                                  (log_test_look): test_loss_<objective>, test_baseline_har_<objective>,
                                  test_baseline_persistence_<objective>, test_baseline_mean_<objective>,
                                  n_test, test_ratio_har, test_dm_stat_har, test_dm_pvalue_har,
                                  test_dm_lags_har, test_dm_fallback_har,
                                  test_dm_{stat,pvalue,lags,fallback}_wide_har, test_ratio_initial,
                                  test_dm_pvalue_initial; test_looks, counting train --look's
                                  looks too (which log nothing else); tag mamba_tune.test_look
                                  (done | failed: <why>)
        run "<trial> lr .. wd .."  tag mlflow.parentRunId; params learning_rate, weight_decay,
          (one per trial)          batch_size and the fixed data/model/train settings; metrics
                                   every epoch with step=epoch (0: before training), the losses as
                                   train_loss_<objective>, val_loss_<objective>, best_val_loss_<objective>;
                                   tags trial_id, mamba_tune.objective, stop_reason, stop_epoch;
                                   artifacts checkpoint/best.pt, config.yaml, loss_curve.png

Every loss is in the units of the sweep's objective (data.objective, tuning/tracking/objective.py): its name is
the tag mamba_tune.objective of every run, and the suffix of every loss metric's key, so that runs of different
objectives are never compared as one. A sweep an earlier version started (its parent run has no such tag) keeps
that version's layout when it is resumed: no tag on the runs it adds, every loss under its unsuffixed key
(val_loss, best_val_loss, test_loss, ...), so that each curve stays under one key.

Written by the driver, through TrackingLog (buffered, in order, idempotent): a resumed sweep or
a restarted trial continues its own runs, and an epoch is logged once.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray.tune
import yaml

from model.atomic import write_text_atomic
from model.bars_location import is_remote
from tuning.search.best_config import train_command, write_best_config
from tuning.search.finalists import winner_or_none
from tuning.search.importance import Importances
from tuning.search.ledger import TrialRecord, best_record, leaderboard
from tuning.search.param_text import other_params_text
from tuning.search.searchable import resolve
from tuning.search.space import Choice, SweepSpace, searched, with_params
from tuning.sweep_files import sweep_looks
from tuning.tracking.lineage import BarsInput, bars_input
from tuning.tracking.log import SWEEP_KEY, TrackingLog, note
from tuning.tracking.objective import LEGACY, OBJECTIVE_TAG, keyed
from tuning.tracking.objective import title as objective_title
from tuning.tracking.ops import KEY_TAG, LOOKS_MARKER, SWEEP_TAG
from tuning.tracking.plots import importance_bars, loss_by_hyperparameter, loss_curve, sweep_curves
from tuning.tracking.store import EPOCH_METRICS, TrackingStore, first_line

RUN_STATUS = {"completed": "FINISHED", "asha": "FINISHED", "gate": "FINISHED", "nan": "FAILED", "error": "FAILED",
              "invalid": "FINISHED"}
TEST_METRICS = ("test_loss", "baseline_har", "baseline_persistence", "baseline_mean", "n_test")  # of test.json
LOOK_TAG = "mamba_tune.test_look"  # done | failed: <why>
HAR_VERDICT = ("ratio", "dm_stat", "dm_pvalue", "dm_lags", "dm_fallback", "dm_stat_wide", "dm_pvalue_wide",
               "dm_lags_wide", "dm_fallback_wide")  # of a look's vs_har, logged as test_<key>_har
CLOSE_TIMEOUT_S = 60.0  # how long the end of a sweep waits for an unreachable store before spooling


@dataclass
class SweepTracking:
    """What the sweep's MLflow logging needs; made by `open_sweep`, used for each trial and by `close_sweep`.

    It holds a thread, so it never travels with the pickled sweep: SweepCallback finds it in ACTIVE.
    """

    log: TrackingLog
    staging: Path  # files waiting to be uploaded (removed once sent)
    space: SweepSpace
    name: str
    data_path: str
    bars: BarsInput | None  # the bars every run of the sweep trains on (its MLflow dataset input; None: unreadable)
    data_sha256: str | None = None  # the bars file's SHA-256 (the manifest's): best.yaml keeps it for a refit
    predates_objectives: bool = False  # its parent run was recorded before objectives: it keeps the old keys
    open_trials: set[str] = field(default_factory=set)
    # What every loss of the sweep is in (data.objective resolved; never searched, so every trial's): set once, here
    objective: str = field(init=False)
    # The objective its MLflow runs are tagged with and its loss keys suffixed with (metric_key); None for a sweep
    # recorded before objectives: no tag, unsuffixed keys
    keys: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.objective = self.space.run.data.loss
        self.keys = None if self.predates_objectives else self.objective


def predates_objectives(log: TrackingLog) -> bool:
    """Whether the sweep's parent run was recorded before objectives (it is there, in the store or waiting in the
    spool, without the tag mamba_tune.objective). Asked once, when the sweep is opened; a store that does not
    answer counts as a new sweep's."""
    tags = log.recorded_tags(SWEEP_KEY)
    return tags is not None and OBJECTIVE_TAG not in tags


def open_sweep(log: TrackingLog, staging: Path, name: str, space_values: dict[str, Any],
               space: SweepSpace, data_path: str, data_summary: dict[str, Any], baselines: dict[str, float],
               settings: dict[str, Any], data_sha256: str | None = None) -> SweepTracking:
    """Start (or reopen) the sweep's parent run with its settings, space and data. Whether the run predates
    objectives is decided here, once: such a sweep keeps the old keys (SweepTracking.keys)."""
    objective, legacy = space.run.data.loss, predates_objectives(log)
    params = {**{f"sweep.{k}": v for k, v in settings.items()}, **_space_params(space),
              **{f"data.{k}": v for k, v in data_summary.items() if k not in ("features", "har")},
              **{f"baseline.{k}" if legacy else f"baseline.{k}_{objective}": v for k, v in baselines.items()}}
    note = (f"Sweep **{name}**: {settings['trials']} trials searching {', '.join(space.search)} "
            f"({space.scheduler.describe()}, gate at epoch {space.gate.epoch}), ranked by "
            f"{objective_title(objective)} ({objective}). Each nested run is one trial; its tag stop_reason says why "
            "it ended.")
    log.start_run(SWEEP_KEY, f"{name} sweep", tags={"mamba_tune.role": "sweep", "mlflow.note.content": note,
                                                    **({} if legacy else {OBJECTIVE_TAG: objective})}, params=params)
    readable = is_remote(data_path) or Path(data_path).is_file()
    bars = bars_input(data_path, data_summary, data_sha256) if readable else None
    tracking = SweepTracking(log, staging, space, name, data_path, bars, data_sha256, legacy)
    if bars is not None:
        log.log_input(SWEEP_KEY, bars)
    write_text_atomic(staging / "sweep" / "space.yaml", yaml.safe_dump(space_values, sort_keys=False))
    write_text_atomic(staging / "sweep" / "data.json", json.dumps({**data_summary, "baselines": baselines}, indent=1))
    for file in ("space.yaml", "data.json"):
        log.log_artifact(SWEEP_KEY, staging / "sweep" / file, remove_after=True)
    return tracking


def find_sweep_run(store: TrackingStore, name: str, sweep_id: str) -> tuple[str, str] | None:
    """(experiment id, run id) of sweep `name`'s parent run in `store`; None when it is not there or the store does
    not answer."""
    try:
        client = store.client()
        experiment = client.get_experiment_by_name(name)
        runs = [] if experiment is None else client.search_runs(
            [experiment.experiment_id], f"tags.`{KEY_TAG}` = '{SWEEP_KEY}' and tags.`{SWEEP_TAG}` = '{sweep_id}'",
            max_results=1)
    except Exception:  # noqa: BLE001 - a link, not a result
        return None
    return (experiment.experiment_id, runs[0].info.run_id) if runs else None


def close_sweep(tracking: SweepTracking, records: list[TrialRecord], interrupted: bool,
                looks: list[dict[str, Any]] = (), look_failure: str | None = None,
                importances: Importances | None = None) -> int:
    """The sweep's summary artifacts (with the hyperparameter importances, when there are some) and its looks
    at the test segment (log_test_look); ends its runs (KILLED when interrupted); returns writes left unsent."""
    try:
        if looks or look_failure:
            log_test_look(tracking.log, list(looks), look_failure, tracking.objective,
                          tracking.predates_objectives)
        _summarise(tracking, records, interrupted, importances)
    except Exception as exc:  # noqa: BLE001 - a failed plot must not hide the sweep's result
        note(f"tracking: could not log the sweep's summary ({first_line(exc)})")
    finally:  # whatever happened above, what was written is sent or spooled
        unsent = tracking.log.close(CLOSE_TIMEOUT_S)
    if not unsent:  # every staged file was sent: the folder holds only empty ones
        shutil.rmtree(tracking.staging, ignore_errors=True)
    return unsent


def log_test_look(log: TrackingLog, looks: list[dict[str, Any]], failure: str | None,
                  objective: str | None = None, legacy_keys: bool | None = None) -> None:
    """Every look at the test segment (test.json's, the first first) on the sweep's run, look k at step k - 1, with
    test_looks (k: the newest says how many there are). A look the sweep took at its winner (sweep_looks) logs its
    figures too: test_loss, test_baseline_*, n_test, test_ratio_har, test_dm_stat_har, test_dm_pvalue_har (and
    test_dm_lags_har, test_dm_fallback_har: 1 where the test fell back to h = 1, 0 where not; test_dm_stat_wide_har,
    test_dm_pvalue_wide_har, test_dm_lags_wide_har, test_dm_fallback_wide_har: the wide statistic),
    test_ratio_initial, test_dm_pvalue_initial; each loss under <key>_<objective> (the look's own "objective", else
    `objective`, else mse_log: a look taken before objectives), or under <key> alone in a sweep recorded before
    objectives (`legacy_keys`; None: asked of the store, predates_objectives). A look `train --look` took (by
    TRAIN_LOOK: a model trained again, not the sweep's winner) logs test_looks alone: it counts, and the run's
    test_loss and verdict stay the sweep's (its figures are in test.json and the train run's --out). A step the run
    holds is not logged again, so logging them all on every `resume` costs nothing and leaves MLflow with each look
    of test.json once. The tag mamba_tune.test_look says `done` or `failed: <why>` (a failed look is tried again by
    `resume`)."""
    if legacy_keys is None and sweep_looks(looks):
        legacy_keys = predates_objectives(log)
    for number, look in enumerate(looks, start=1):
        number = int(look.get("look", number))
        metrics = {}
        if sweep_looks([look]):
            metrics = keyed({f"test_{k}" if k.startswith("baseline_") else k: float(look[k]) for k in TEST_METRICS
                             if k in look}, None if legacy_keys else look.get("objective") or objective or LEGACY)
            for reference, keys in (("har", HAR_VERDICT), ("initial", ("ratio", "dm_pvalue"))):
                versus = look.get(f"vs_{reference}") or {}
                metrics.update({f"test_{k}_{reference}": float(versus[k]) for k in keys if k in versus})
        log.log_epoch(SWEEP_KEY, number - 1, {**metrics, LOOKS_MARKER: float(number)})
    log.set_tags(SWEEP_KEY, {LOOK_TAG: f"failed: {failure}" if failure else "done"})


def _summarise(tracking: SweepTracking, records: list[TrialRecord], interrupted: bool,
               importances: Importances | None) -> None:
    log, folder = tracking.log, tracking.staging / "sweep"
    for trial_id in sorted(tracking.open_trials):  # started, not finished: they continue on resume
        log.end_run(trial_id, "KILLED")
    if records:
        rows = [{"rank": i, **r.__dict__} for i, r in enumerate(leaderboard(records), start=1)]
        write_text_atomic(folder / "leaderboard.json", json.dumps(rows, indent=1))
        title = f"sweep {tracking.name}: {len(records)} trials finished"
        sweep_curves(records, folder / "val_loss_curves.png", title, tracking.objective)
        loss_by_hyperparameter(records, folder / "val_loss_by_hyperparameter.png", title, tracking.objective)
        files = ["leaderboard.json", "val_loss_curves.png", "val_loss_by_hyperparameter.png"]
        best = winner_or_none(records, tracking.space.confirm, tracking.space.run.train.seed)
        if best is not None:
            write_best_config(tracking.space, best, tracking.name, tracking.data_path, folder / "best.yaml", records,
                              tracking.data_sha256)
            log.set_tags(SWEEP_KEY, {"best_trial_id": best.trial_id})
            files.append("best.yaml")
        if importances is not None:
            write_text_atomic(folder / "param_importances.json", json.dumps(importances.to_dict(), indent=1))
            importance_bars(importances.by_param, folder / "param_importances.png",
                            f"sweep {tracking.name}: fANOVA over {importances.trials} trials")
            files += ["param_importances.json", "param_importances.png"]
        for file in files:
            log.log_artifact(SWEEP_KEY, folder / file, remove_after=True)
    if not interrupted:  # every trial Ray Tune knows has ended: any other run was lost with a killed driver
        log.end_lost_runs([r.trial_id for r in records])
    log.end_run(SWEEP_KEY, "KILLED" if interrupted else "FINISHED")


@dataclass(frozen=True)
class TrialEnd:
    """A trial's end, built once by the sweep (tuning/sweep/trial_lifecycle.py) for the ledger and MLflow."""

    record: TrialRecord  # as the ledger holds it
    history: list[dict[str, Any]]  # every epoch up to its stop, from its checkpoint ([] when none is left)
    best: Path | None  # its record's best.pt, staged for upload (None: sent already, or it saved none)
    finished: tuple[TrialRecord, ...]  # every trial the ledger holds, this one included


def open_trial(t: SweepTracking, trial_id: str, params: dict[str, Any]) -> None:
    """The trial's nested run: its parameters and the fixed settings of its training, each param under the setting's
    one dotted name (train.lr, also where the space searches it as learning_rate), so the UI shows one name."""
    run = with_params(t.space.run, params)
    chosen = {resolve(key).name for key in searched(params)}  # e.g. train.lr for learning_rate
    fixed = {f"{section}.{k}": v for section, values in run.to_dict().items() for k, v in values.items()
             if f"{section}.{k}" not in chosen}
    stage = "confirm" if "finalist" in params else "search"  # a confirmation run (tuning/search/finalists.py)
    other = other_params_text(params)
    by_name = {resolve(key).name: value for key, value in searched(params).items()}  # train.lr, not learning_rate
    name = (f"{trial_id} lr {by_name.get('train.lr', 0):.2e} wd {by_name.get('train.weight_decay', 0):.1e} "
            f"bs {by_name.get('train.batch_size', '-')}") + (f" {other}" if other else "") + \
        (f" confirm seed {run.train.seed} fold {run.data.fold}" if stage == "confirm" else "")
    tags = {"trial_id": trial_id, "mamba_tune.role": "trial", "mamba_tune.stage": stage,
            **({} if t.keys is None else {OBJECTIVE_TAG: t.keys}), "mamba_tune.seed": run.train.seed,
            "mamba_tune.fold": run.data.fold,
            **({"mamba_tune.finalist": params["finalist"]} if stage == "confirm" else {})}
    t.log.start_run(trial_id, name, parent=SWEEP_KEY, tags=tags, params={**by_name, **fixed})
    if t.bars is not None:
        t.log.log_input(trial_id, t.bars)
    t.open_trials.add(trial_id)


def log_trial_epoch(t: SweepTracking, trial_id: str, params: dict[str, Any], result: dict[str, Any]) -> None:
    """An epoch's metrics (the run is opened first if this driver has not yet: a resumed trial)."""
    if trial_id not in t.open_trials:
        open_trial(t, trial_id, params)
    if "epoch" in result:
        t.log.log_epoch(trial_id, result["epoch"], _epoch_metrics(result, t.keys))


def end_trial(t: SweepTracking, params: dict[str, Any], end: TrialEnd) -> None:
    """Its end: epochs not yet sent, tags, best.pt, config.yaml and loss curve; the sweep's running summary.

    For a trial ended again after a killed driver the same writes are sent again, in case that driver had
    not sent them (every write is idempotent).
    """
    record, key = end.record, end.record.trial_id
    if key not in t.open_trials:
        open_trial(t, key, params)
    t.open_trials.discard(key)
    reason, epoch = record.stop_reason, record.stop_epoch
    for metrics in end.history:  # epochs an earlier driver reported but never sent (killed): sent now, once
        t.log.log_epoch(key, metrics["epoch"], _epoch_metrics(metrics, t.keys))
    t.log.set_tags(key, {"stop_reason": reason, "stop_epoch": epoch, "best_epoch": record.best_epoch})
    if end.best is not None:
        t.log.log_artifact(key, end.best, "checkpoint", remove_after=True)
    folder = t.staging / key
    config = with_params(t.space.run, params)
    config.write_yaml(folder / "config.yaml", train_command(t.data_path, Path("config.yaml")),
                      (f"Trial {key} of sweep {t.name}; ended {reason} at epoch {epoch}.",))
    t.log.log_artifact(key, folder / "config.yaml", remove_after=True)
    if end.history:
        loss_curve(end.history, folder / "loss_curve.png", f"trial {key}: ended {reason} at epoch {epoch}",
                   t.objective)
        t.log.log_artifact(key, folder / "loss_curve.png", remove_after=True)
    t.log.end_run(key, RUN_STATUS[reason])
    best_trial = best_record(list(end.finished))
    summary = {"trials_finished": len(end.finished)}
    if best_trial is not None:
        summary["best_val_loss"] = best_trial.best_val_loss
    t.log.log_epoch(SWEEP_KEY, len(end.finished), keyed(summary, t.keys), int(time.time() * 1000))


class TrackingCallback(ray.tune.Callback):
    """Held by sweeps an earlier version saved (Ray Tune restores its callbacks with the sweep): it did
    the MLflow half of a trial's life, which SweepCallback does now. Restored, it does nothing."""


@contextmanager
def never_stops_the_sweep(what: str, trial_id: str) -> Iterator[None]:
    """Preparing a write can fail (a full disk, unreadable storage): say so; training goes on."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - tracking must not end the sweep
        note(f"tracking: could not log {what} of trial {trial_id} ({first_line(exc)}); the sweep goes on")



def _space_params(space: SweepSpace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, dim in space.search.items():
        if isinstance(dim, Choice):
            params[f"search.{name}"] = f"choice {list(dim.choices)}"
        else:
            step = f" step {dim.step:g}" if getattr(dim, "step", None) not in (None, 1) else ""
            params[f"search.{name}"] = f"{'log' if dim.log else ''}uniform [{dim.low:g}, {dim.high:g}]{step}"
    params["sampler"] = space.sampler
    params.update({f"scheduler.{k}": v for k, v in space.scheduler.to_dict().items()})  # the kind's settings
    params.update({f"gate.{k}": v for k, v in space.gate.__dict__.items() if v is not None})
    params.update({f"resources.{k}": v for k, v in space.resources.__dict__.items() if v is not None})
    if space.confirm is not None:
        params.update({f"confirm.{k}": v for k, v in space.confirm.__dict__.items()})
    return params


def _epoch_metrics(result: dict[str, Any], objective: str | None) -> dict[str, float]:
    """An epoch's EPOCH_METRICS under their MLflow keys: the losses suffixed with the objective (None: not)."""
    return keyed({k: result[k] for k in EPOCH_METRICS if k in result and isinstance(result[k], (int, float))},
                 objective)
