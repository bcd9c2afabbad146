"""A trial's life in a sweep, as Ray Tune's callback sees it on the driver: progress events, then its
end, built once (its ledger record, its history, its best.pt: tracking/runs.py's TrialEnd) and handed
to the ledger and to MLflow. MLflow never stops the sweep: a failed write is reported, not raised.

Ray Tune pickles the callback with the sweep and restores it on `resume`: what it holds must
pickle (no threads, no open filesystems), and a restored Tuner takes no new callbacks, so the
sweep's live tracking is found by the ledger's path in ACTIVE, which `session.run` fills.
"""

from __future__ import annotations

import time
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow.fs
import ray.tune
from ray.tune.experiment import Trial

from tuning.progress import EpochEnded, TrialEnded, TrialStarted, publish
from tuning.search.finalists import CONFIRM, SEARCH
from tuning.search.gate import INVALID, stop_reason
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.space import SweepSpace, searched
from tuning.sweep.orphan_groups import OrphanGroups
from tuning.sweep.record_copies import copy_records_or_note, moved_folder
from tuning.sweep.report_relay import end_run
from tuning.sweep.trial_files import (
    final_checkpoint,
    prune_best_snapshots,
    remove_best_snapshots,
    stage_best,
    staged_best,
    storage_filesystem,
)
from tuning.sweep_files import TRACKING_STAGING, SweepPaths
from tuning.tracking.runs import SweepTracking, TrialEnd, end_trial, log_trial_epoch, never_stops_the_sweep, open_trial

# The sweep's live MLflow tracking (it holds a thread), by ledger path, for SweepCallback: Ray Tune pickles
# its callbacks with the sweep and restores them on resume, so a callback cannot hold it itself.
ACTIVE: dict[str, SweepTracking] = {}


def active_key(ledger_path: Path) -> str:
    return str(ledger_path.resolve())


class SweepCallback(ray.tune.Callback):
    """A trial's life in the sweep: progress events, then its end, built once (record, history, best.pt)
    and handed to the ledger and to MLflow. MLflow never stops the sweep: a failed write is reported."""

    def __init__(self, ledger_path: Path, space: SweepSpace, storage: str) -> None:
        self.ledger_path, self.gate, self.max_epochs = ledger_path, space.gate, space.scheduler.max_epochs
        self.base_seed = space.run.train.seed  # a search trial's seed (a confirmation run's config names its own)
        self.storage = storage  # where trial checkpoints live (a path or a URI)
        self.train_s: dict[str, float] = {}
        self.checkpoints: dict[str, str] = {}  # trial id -> its latest checkpoint folder
        self.recorded: set[str] | None = None  # trial ids in the ledger, read once per driver
        self.orphans = OrphanGroups()  # worker placement groups no trial's run has given back

    def __getstate__(self) -> dict[str, Any]:  # what Ray Tune pickles: no open filesystem, no watch of live groups
        return {k: v for k, v in self.__dict__.items() if k not in ("fs", "orphans")}

    def __setstate__(self, state: dict[str, Any]) -> None:  # a sweep saved by an older version lacks these
        self.__dict__.update({"storage": None, "checkpoints": {}, "base_seed": 0, **state, "recorded": None,
                              "orphans": OrphanGroups()})
        self.ledger_path = moved_folder(self.ledger_path.parent) / self.ledger_path.name  # saved by another head

    @cached_property
    def fs(self) -> pyarrow.fs.FileSystem:
        """The filesystem of the trials' checkpoints (self.storage), opened once per driver."""
        return storage_filesystem(self.storage)

    @property
    def tracking(self) -> SweepTracking:
        return ACTIVE[active_key(self.ledger_path)]

    @property
    def _train_storage(self) -> str:
        """Ray Train's storage of this sweep's trials (tuning/sweep/trial_files.py)."""
        return f"{self.storage.rstrip('/')}/{self.ledger_path.parent.name}/train"

    def _in_ledger(self, trial: Trial) -> bool:
        """Recorded already: by this driver, or by one killed since (TrialSetup.finished ends it again)."""
        if self.recorded is None:
            self.recorded = set(Ledger(self.ledger_path).records)
        return trial.trial_id in self.recorded

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        self.orphans.give_back(time.monotonic())  # at most every few seconds (tuning/sweep/orphan_groups.py)

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        if self._in_ledger(trial):  # ended before a driver was killed: only its end comes again
            return
        publish(TrialStarted(trial.trial_id, dict(trial.config)))
        with never_stops_the_sweep("the start", trial.trial_id):
            open_trial(self.tracking, trial.trial_id, dict(trial.config))

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any) -> None:
        if self._in_ledger(trial):
            return
        self.train_s[trial.trial_id] = self.train_s.get(trial.trial_id, 0.0) + result.get("epoch_s", 0.0)
        if result.get("checkpoint_path"):
            self.checkpoints[trial.trial_id] = result["checkpoint_path"]
        if self.storage and result.get("best_epoch") == result.get("epoch", -1) and result["best_epoch"] > 0:
            # a stop comes at this result or a later one: the snapshots of earlier best epochs are done with
            prune_best_snapshots(self.fs, self._train_storage, trial.trial_id,
                                 result["best_epoch"])
        if "epoch" in result and "val_loss" in result and INVALID not in result:
            publish(EpochEnded(trial.trial_id, int(result["epoch"]), float(result["val_loss"])))
        with never_stops_the_sweep("an epoch", trial.trial_id):
            log_trial_epoch(self.tracking, trial.trial_id, dict(trial.config), result)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._finish(trials, trial, errored=False)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._finish(trials, trial, errored=True)

    def _finish(self, trials: list[Trial], trial: Trial, errored: bool) -> None:
        end_run(trial.trial_id)  # a stopped trial's Train run and placement group (tuning/sweep/report_relay.py)
        staging = self.ledger_path.parent / TRACKING_STAGING
        ledger = Ledger(self.ledger_path)
        if self._in_ledger(trial):  # recorded by a killed driver: MLflow gets its end again, in case it had not
            end = self._recorded_end(ledger, trial.trial_id, staging)
        else:
            end = self._new_end(trial, errored, staging, ledger)
            running = sum(t.status == Trial.RUNNING and t is not trial for t in trials)
            why = _error_line(trial) if errored else (trial.last_result or {}).get(INVALID)  # invalid: the refusal
            publish(TrialEnded(end.record, running, end.finished, why))
        with never_stops_the_sweep("the end", trial.trial_id):
            end_trial(self.tracking, dict(trial.config), end)
        if self.storage:
            copy_records_or_note(SweepPaths(self.ledger_path.parent.name, self.ledger_path.parent, self.storage))

    def _new_end(self, trial: Trial, errored: bool, staging: Path, ledger: Ledger) -> TrialEnd:
        """Why and where it stopped, its history and best.pt (staged before the record is written: MLflow
        gets the record's best.pt, never one the trial wrote after its stop); then its ledger record."""
        last = trial.last_result or None
        reason, epoch = stop_reason(self.gate, self.max_epochs, last, errored)
        last = last or {}
        best_epoch = int(last.get("best_epoch", 0))
        history: list[dict[str, Any]] = []
        best = None
        if self.storage:
            fs, train = self.fs, self._train_storage
            named = self.checkpoints.get(trial.trial_id) or last.get("checkpoint_path")
            checkpoint, history = final_checkpoint(fs, named, train, trial.trial_id, epoch)
            best = stage_best(fs, train, trial.trial_id, best_epoch, checkpoint, staged_best(staging, trial.trial_id))
            remove_best_snapshots(fs, train, trial.trial_id)
        config = dict(trial.config)
        record = TrialRecord(
            trial_id=trial.trial_id, params=searched(config), stop_reason=reason, stop_epoch=epoch,
            best_val_loss=float(last.get("best_val_loss", float("inf"))), best_epoch=best_epoch,
            e0_val_loss=float(last.get("e0_val_loss", float("nan"))),
            baseline_persistence=float(last.get("baseline_persistence", float("nan"))),
            baseline_har=float(last.get("baseline_har", float("nan"))),
            train_s=self.train_s.get(trial.trial_id, 0.0), val_curve=tuple(m["val_loss"] for m in history),
            stage=CONFIRM if "finalist" in config else SEARCH, seed=config.get("seed", self.base_seed),
            fold=config.get("fold", 1), finalist=config.get("finalist"))
        ledger.add(record)
        self.recorded.add(trial.trial_id)
        return TrialEnd(record, history, best, tuple(ledger.records.values()))

    def _recorded_end(self, ledger: Ledger, trial_id: str, staging: Path) -> TrialEnd:
        """The end an earlier driver recorded: its history from the checkpoint; its best.pt if still unsent."""
        record, history = ledger.records[trial_id], []
        if self.storage:
            _, history = final_checkpoint(self.fs, None, self._train_storage,
                                          record.trial_id, record.stop_epoch)
        best = staged_best(staging, trial_id)
        return TrialEnd(record, history, best if best.exists() else None, tuple(ledger.records.values()))


def _error_line(trial: Trial) -> str:
    """The last line of the trial's error (its type and message)."""
    path = getattr(trial, "error_file", None)
    try:
        lines = [line for line in Path(path).read_text().splitlines() if line.strip()] if path else []
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "see the trial's error.txt"
