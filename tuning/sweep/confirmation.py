"""A sweep's second stage: its finalists trained again on the other seeds and folds (tuning/search/finalists.py).

The runs are trials of the same sweep: the same trainable, Ray Train path, resources and callback
(ledger, progress, MLflow runs nested under the sweep's, tagged mamba_tune.stage=confirm). They run
in a Ray Tune experiment of their own (tune-confirm/), with no searcher sampling them (Optuna never
sees them), no scheduler and no gate: each goes to its last epoch unless its loss turns non-finite.
An interrupted stage is started again by `resume`, for the runs the ledger holds no result of yet: those
never run, interrupted, or failed (an error is not a result; a diverged run is).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import ray
import ray.tune
from ray.tune.search.basic_variant import BasicVariantGenerator

from model.data import load_dataset
from tuning.search.finalists import ConfirmRun, finalist_scores, pending_runs
from tuning.search.gate import GateConfig
from tuning.search.ledger import Ledger
from tuning.search.resources import TRIAL_DRIVER_RESOURCES, TrialPlan
from tuning.search.space import SweepSpace
from tuning.sweep.trainable import TrialSetup, run_trial
from tuning.sweep.trial_lifecycle import SweepCallback

CONFIRM_DIR = "tune-confirm"  # the stage's Ray Tune experiment, beside the search's tune/


def confirmation_runs(ledger_path: Path, space: SweepSpace) -> list[ConfirmRun]:
    """The runs still to do ([] when the space confirms nothing or all are recorded)."""
    if space.confirm is None:
        return []
    return pending_runs(list(Ledger(ledger_path).records.values()), space.confirm, space.run.train.seed)


def run_confirmation(ledger_path: Path, space: SweepSpace, setup: TrialSetup, plan: TrialPlan, data_path: str,
                     sweep_storage: str, ray_storage: str) -> None:
    """Run the pending confirmation runs until each has ended or the sweep is interrupted; which still have no
    result the ledger says (confirmation_runs): the session asks it, not Ray Tune's count of ended trials."""
    runs = confirmation_runs(ledger_path, space)
    if not runs:
        return
    if setup.bars is None:  # with bars, each run's workers build its fold's Dataset (tuning/sweep/trainable.py)
        setup = dataclasses.replace(setup, fold_datasets=_fold_datasets(space, runs, data_path))
    trainable = ray.tune.with_resources(ray.tune.with_parameters(run_trial, setup=setup), TRIAL_DRIVER_RESOURCES)
    # Every run to its last epoch: a gate with no threshold, so only a non-finite loss stops one early.
    open_gate = dataclasses.replace(space, gate=GateConfig(epoch=space.gate.epoch))
    configs = [run.config() for run in runs]
    tuner = ray.tune.Tuner(
        trainable,
        param_space={key: None for config in configs for key in config},  # Tune sets each run's own values
        tune_config=ray.tune.TuneConfig(
            # Its own limit: Tune applies max_concurrent_trials to a Searcher, not to this generator.
            search_alg=BasicVariantGenerator(points_to_evaluate=configs, max_concurrent=plan.concurrency),
            num_samples=len(runs), reuse_actors=True),  # as the search's (tuning/sweep/report_relay.py)
        run_config=ray.tune.RunConfig(name=CONFIRM_DIR, storage_path=sweep_storage, verbose=0,
                                      callbacks=[SweepCallback(ledger_path, open_gate, ray_storage)]),
    )
    tuner.fit()


def record_in_study(ledger_path: Path, space: SweepSpace, study_url: str, study_name: str) -> None:
    """Each finalist's confirmed score (the mean over its fresh runs; its search trial's loss beside it) as a user
    attribute of the Optuna study, `finalist.<ray trial id>`:
    Optuna refuses to change a finished trial (its own user attributes), so the study holds them."""
    if space.confirm is None:
        return
    study = optuna.load_study(study_name=study_name, storage=study_url)
    numbers = {t.user_attrs.get("ray_trial_id"): t.number for t in study.trials}
    records = list(Ledger(ledger_path).records.values())
    for score in finalist_scores(records, space.confirm, space.run.train.seed):
        runs = [{"trial_id": r.trial_id, "seed": r.seed, "fold": r.fold, "best_val_loss": r.best_val_loss,
                 "stop_reason": r.stop_reason} for r in records if r.finalist == score.record.trial_id]
        study.set_user_attr(f"finalist.{score.record.trial_id}", {
            "optuna_trial": numbers.get(score.record.trial_id), "mean": score.mean, "std": score.std, "n": score.n,
            "planned": score.planned, "search_loss": score.search_loss, "runs": runs})  # mean: its fresh runs'


def _fold_datasets(space: SweepSpace, runs: list[ConfirmRun], path: str) -> dict[int, ray.ObjectRef]:
    """The Dataset of every fold past the first that a run needs, loaded once each, in the object store."""
    folds = sorted({run.fold for run in runs if run.fold > 1})
    return {fold: ray.put(load_dataset(path, dataclasses.replace(space.run.data, fold=fold))) for fold in folds}
