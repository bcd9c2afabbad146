"""A sweep in MLflow: one experiment per sweep name, a parent run for the sweep, a nested run per trial.

    experiment <sweep name>
      run "<name> sweep"          params: sweep settings, search space, data summary, baselines
        (mamba_tune.role=sweep)   artifacts: space.yaml, data.json; when it ends: leaderboard.json,
                                  best.yaml, val_loss_curves.png, val_loss_by_hyperparameter.png
                                  metrics: best_val_loss and trials_finished, step = trials finished
        run "<trial> lr .. wd .."  tag mlflow.parentRunId; params learning_rate, weight_decay,
          (one per trial)          batch_size and the fixed data/model/train settings; metrics
                                   every epoch with step=epoch (0: before training); tags trial_id,
                                   stop_reason, stop_epoch; artifacts checkpoint/best.pt,
                                   config.yaml, loss_curve.png

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

import pyarrow.fs
import ray.tune
import yaml
from ray.tune.experiment import Trial

from model.atomic import write_text_atomic
from tuning.best_config import train_command, write_best_config
from tuning.gate import stop_reason
from tuning.ledger import Ledger, TrialRecord, best_record, leaderboard
from tuning.plots import loss_by_hyperparameter, loss_curve, sweep_curves
from tuning.space import SEARCHABLE, Choice, SweepSpace, with_params
from tuning.tracking_log import SWEEP_KEY, TrackingLog, note
from tuning.tracking_store import EPOCH_METRICS, first_line
from tuning.trial_files import copy_file, final_checkpoint, staged_best

RUN_STATUS = {"completed": "FINISHED", "asha": "FINISHED", "gate": "FINISHED", "nan": "FAILED", "error": "FAILED"}
CLOSE_TIMEOUT_S = 60.0  # how long the end of a sweep waits for an unreachable store before spooling


@dataclass
class SweepTracking:
    """What the sweep's MLflow logging needs; made by `open_sweep`, used by TrackingCallback and `close_sweep`."""

    log: TrackingLog
    staging: Path  # files waiting to be uploaded (removed once sent)
    fs: pyarrow.fs.FileSystem  # the sweep storage's filesystem, where trial checkpoints live
    space: SweepSpace
    name: str
    data_path: str
    train_storage: str  # Ray Train's storage of the trials' checkpoints (<sweep storage>/train)
    open_trials: set[str] = field(default_factory=set)
    done_before: set[str] = field(default_factory=set)  # ended before a killed driver: their epochs are logged


def open_sweep(log: TrackingLog, staging: Path, fs: pyarrow.fs.FileSystem, name: str, space_values: dict[str, Any],
               space: SweepSpace, data_path: str, data_summary: dict[str, Any], baselines: dict[str, float],
               settings: dict[str, Any], train_storage: str) -> SweepTracking:
    """Start (or reopen) the sweep's parent run with its settings, space and data."""
    params = {**{f"sweep.{k}": v for k, v in settings.items()}, **_space_params(space),
              **{f"data.{k}": v for k, v in data_summary.items() if k != "features"},
              **{f"baseline.{k}": v for k, v in baselines.items()}}
    note = (f"Sweep **{name}**: {settings['trials']} trials searching {', '.join(space.search)} "
            f"(ASHA to {space.scheduler.max_epochs} epochs, gate at epoch {space.gate.epoch}). "
            "Each nested run is one trial; its tag stop_reason says why it ended.")
    log.start_run(SWEEP_KEY, f"{name} sweep", tags={"mamba_tune.role": "sweep", "mlflow.note.content": note},
                  params=params)
    tracking = SweepTracking(log, staging, fs, space, name, data_path, train_storage)
    write_text_atomic(staging / "sweep" / "space.yaml", yaml.safe_dump(space_values, sort_keys=False))
    write_text_atomic(staging / "sweep" / "data.json", json.dumps({**data_summary, "baselines": baselines}, indent=1))
    for file in ("space.yaml", "data.json"):
        log.log_artifact(SWEEP_KEY, staging / "sweep" / file, remove_after=True)
    return tracking


def close_sweep(tracking: SweepTracking, records: list[TrialRecord], interrupted: bool) -> int:
    """The sweep's summary artifacts; ends its runs (KILLED when interrupted); returns writes left unsent."""
    try:
        _summarise(tracking, records, interrupted)
    except Exception as exc:  # noqa: BLE001 - a failed plot must not hide the sweep's result
        note(f"tracking: could not log the sweep's summary ({first_line(exc)})")
    finally:  # whatever happened above, what was written is sent or spooled
        unsent = tracking.log.close(CLOSE_TIMEOUT_S)
    if not unsent:  # every staged file was sent: the folder holds only empty ones
        shutil.rmtree(tracking.staging, ignore_errors=True)
    return unsent


def _summarise(tracking: SweepTracking, records: list[TrialRecord], interrupted: bool) -> None:
    log, folder = tracking.log, tracking.staging / "sweep"
    for trial_id in sorted(tracking.open_trials):  # started, not finished: they continue on resume
        log.end_run(trial_id, "KILLED")
    if records:
        rows = [{"rank": i, **r.__dict__} for i, r in enumerate(leaderboard(records), start=1)]
        write_text_atomic(folder / "leaderboard.json", json.dumps(rows, indent=1))
        title = f"sweep {tracking.name}: {len(records)} trials finished"
        sweep_curves(records, folder / "val_loss_curves.png", title)
        loss_by_hyperparameter(records, folder / "val_loss_by_hyperparameter.png", title)
        files = ["leaderboard.json", "val_loss_curves.png", "val_loss_by_hyperparameter.png"]
        best = best_record(records)
        if best is not None:
            write_best_config(tracking.space, best, tracking.name, tracking.data_path, folder / "best.yaml")
            log.set_tags(SWEEP_KEY, {"best_trial_id": best.trial_id})
            files.append("best.yaml")
        for file in files:
            log.log_artifact(SWEEP_KEY, folder / file, remove_after=True)
    if not interrupted:  # every trial Ray Tune knows has ended: any other run was lost with a killed driver
        log.end_lost_runs([r.trial_id for r in records])
    log.end_run(SWEEP_KEY, "KILLED" if interrupted else "FINISHED")


ACTIVE: dict[str, SweepTracking] = {}  # sweep id -> this process's live tracking (threads do not pickle)


class TrackingCallback(ray.tune.Callback):
    """Logs each trial to its nested MLflow run: params at start, metrics every epoch, artifacts at the end.

    Tune pickles its callbacks with the experiment and restores them on resume, so this one holds
    only the sweep's id; the live SweepTracking is looked up in ACTIVE, where `run` put it.
    """

    def __init__(self, sweep_id: str, ledger_path: Path) -> None:
        self.sweep_id, self.ledger_path = sweep_id, ledger_path
        self.checkpoints: dict[str, str] = {}  # trial id -> its latest checkpoint folder in the storage
        self.staged_by_ledger = True  # SweepCallback stages each record's best.pt (trial_files.staged_best)

    def __setstate__(self, state: dict[str, Any]) -> None:  # a sweep saved by an older version: it did not
        self.__dict__.update({"staged_by_ledger": False, **state})

    @property
    def tracking(self) -> SweepTracking:
        return ACTIVE[self.sweep_id]

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        with _never_stops_the_sweep("start", trial):
            if trial.trial_id in Ledger(self.ledger_path).records:  # ended before a driver was killed
                self.tracking.done_before.add(trial.trial_id)
                return
            self._open(trial)

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any) -> None:
        with _never_stops_the_sweep("an epoch", trial):
            if trial.trial_id in self.tracking.done_before:
                return
            if trial.trial_id not in self.tracking.open_trials:
                self._open(trial)
            if result.get("checkpoint_path"):
                self.checkpoints[trial.trial_id] = result["checkpoint_path"]
            if "epoch" in result:
                self.tracking.log.log_epoch(trial.trial_id, result["epoch"], _epoch_metrics(result))

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        with _never_stops_the_sweep("the end", trial):
            self._finish(trial, errored=False)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        with _never_stops_the_sweep("the end", trial):
            self._finish(trial, errored=True)

    def _open(self, trial: Trial) -> None:
        t = self.tracking
        params = dict(trial.config)
        run = with_params(t.space.run, params).to_dict()
        fixed = {f"{section}.{k}": v for section, values in run.items() for k, v in values.items()
                 if not (section == "train" and k in SEARCHABLE.values())}
        name = (f"{trial.trial_id} lr {params.get('learning_rate', 0):.2e} wd {params.get('weight_decay', 0):.1e} "
                f"bs {params.get('batch_size', '-')}")
        t.log.start_run(trial.trial_id, name, parent=SWEEP_KEY, tags={"trial_id": trial.trial_id,
                                                                      "mamba_tune.role": "trial"},
                        params={**params, **fixed})
        t.open_trials.add(trial.trial_id)

    def _finish(self, trial: Trial, errored: bool) -> None:
        """Its end, from the ledger's record (for a trial ended again after a killed driver: sent again, the
        same writes, in case the killed driver had not sent them)."""
        t, key = self.tracking, trial.trial_id
        if key not in t.open_trials:
            self._open(trial)
        t.open_trials.discard(key)
        last = trial.last_result or {}
        records = Ledger(self.ledger_path).records  # SweepCallback, called first, has recorded this trial
        record = records.get(key)
        reason, epoch = ((record.stop_reason, record.stop_epoch) if record else
                         stop_reason(t.space.gate, t.space.scheduler.max_epochs, last or None, errored))
        checkpoint, history = final_checkpoint(t.fs, self.checkpoints.get(key) or last.get("checkpoint_path"),
                                               t.train_storage, key, epoch)
        for metrics in history:  # epochs an earlier driver reported but never sent (killed): sent now, once
            t.log.log_epoch(key, metrics["epoch"], _epoch_metrics(metrics))
        t.log.set_tags(key, {"stop_reason": reason, "stop_epoch": epoch,
                             "best_epoch": record.best_epoch if record else last.get("best_epoch", 0)})
        folder, best = t.staging / key, staged_best(t.staging, key)
        if not self.staged_by_ledger:
            best = copy_file(t.fs, checkpoint, "best.pt", best)
        elif not best.exists():  # sent before a driver was killed (or the trial left no checkpoint)
            best = None
        if best is not None:
            t.log.log_artifact(key, best, "checkpoint", remove_after=True)
        config = with_params(t.space.run, dict(trial.config))
        config.write_yaml(folder / "config.yaml", train_command(t.data_path, Path("config.yaml")),
                          (f"Trial {key} of sweep {t.name}; ended {reason} at epoch {epoch}.",))
        t.log.log_artifact(key, folder / "config.yaml", remove_after=True)
        if history:
            loss_curve(history, folder / "loss_curve.png", f"trial {key}: ended {reason} at epoch {epoch}")
            t.log.log_artifact(key, folder / "loss_curve.png", remove_after=True)
        t.log.end_run(key, RUN_STATUS[reason])
        finished = list(records.values())
        best_trial = best_record(finished)
        summary = {"trials_finished": len(finished)}
        if best_trial is not None:
            summary["best_val_loss"] = best_trial.best_val_loss
        t.log.log_epoch(SWEEP_KEY, len(finished), summary, int(time.time() * 1000))


@contextmanager
def _never_stops_the_sweep(what: str, trial: Trial) -> Iterator[None]:
    """Preparing a write can fail here (a full disk, unreadable storage): say so; training goes on."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - tracking must not end the sweep
        note(f"tracking: could not log {what} of trial {trial.trial_id} ({first_line(exc)}); the sweep goes on")



def _space_params(space: SweepSpace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, dim in space.search.items():
        if isinstance(dim, Choice):
            params[f"search.{name}"] = f"choice {list(dim.choices)}"
        else:
            params[f"search.{name}"] = f"{'log' if dim.log else ''}uniform [{dim.low:g}, {dim.high:g}]"
    params.update({f"scheduler.{k}": v for k, v in space.scheduler.__dict__.items()})
    params.update({f"gate.{k}": v for k, v in space.gate.__dict__.items() if v is not None})
    params.update({f"resources.{k}": v for k, v in space.resources.__dict__.items() if v is not None})
    return params


def _epoch_metrics(result: dict[str, Any]) -> dict[str, float]:
    return {k: result[k] for k in EPOCH_METRICS if k in result and isinstance(result[k], (int, float))}
