"""The sweep's one look at the test segment: once the winner is chosen (confirmed), its best.pt is scored there,
once, and, when it was confirmed on other seeds, its seed ensemble too (the mean forecast of its runs on the
validation segment; `best --register --ensemble` ships that).

Nothing before it reads the test segment: not a trial, not the scheduler, not the choice of the winner.
Beside the winner's loss the look says whether it beats HAR by more than noise: the ratio of the two losses
and a Diebold-Mariano test of their per-sample losses (model/diebold_mariano.py), every loss the sweep's objective's
(data.objective: model/objectives.py; the look records its name, "objective"). The same is said against the
space's first initial point (the untuned configuration, as its search trial trained it): for reference only,
it chooses nothing. Where the space searches data settings, each model is scored on the Dataset it trained on, and
the two are compared on the test samples both forecast, in the winner's units: with data.window searched, every
Dataset of the sweep has the same test samples and HAR (tuning/search/sample_alignment.py), so those are all of them.

Every look is kept: <sweep folder>/test.json holds a list, one entry per look (the trial, the time, the
sweep's search trials at that moment). A sweep whose winner already has a look reads it back instead of
looking again; a sweep extended by `resume --trials N` whose winner changed looks at the new one, and the
entry is added, never replaced.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from model.data import Dataset
from model.holdout import har_losses, losses_on_test_segment, score_ensemble, score_losses
from model.verdict import overlap, versus
from tuning.search.ledger import TrialRecord
from tuning.search.space import SweepSpace
from tuning.sweep.trial_files import stage_record_best, storage_filesystem
from tuning.sweep_files import append_look, latest_look


class LookFailed(Exception):
    """The look could not be taken (the winner's checkpoint is gone, the storage does not answer...): the sweep
    says so, and `resume` tries again."""


def look_due(folder: Path, winner: TrialRecord, data: Dataset) -> bool:
    """Whether the winner still needs its look: the data have a test segment and no look scored it."""
    return bool(len(data.test_index)) and latest_look(folder, winner.trial_id) is None


def look_at_test_segment(folder: Path, ray_storage: str, train_storage: str, winner: TrialRecord, data: Dataset,
                         members: list[TrialRecord], initial: TrialRecord | None, trials: int,
                         initial_data: Dataset | None = None) -> dict[str, Any] | None:
    """The winner's look (see `score`), taken and added to test.json unless one is there already; None when the
    data have no test segment. Raises LookFailed when a checkpoint it needs is gone. `data`: the Dataset the winner
    trained on; `initial_data`: the one the initial trial trained on, where its data settings differ."""
    if not len(data.test_index):
        return None
    kept = latest_look(folder, winner.trial_id)
    if kept is not None:
        return kept
    return append_look(folder, {"trials": trials, **score(ray_storage, train_storage, winner, data, members, initial,
                                                          initial_data)})


def score(ray_storage: str, train_storage: str, winner: TrialRecord, data: Dataset, members: list[TrialRecord],
          initial: TrialRecord | None, initial_data: Dataset | None = None) -> dict[str, Any]:
    """{trial_id, best_epoch, objective (what every loss is in), test_loss, baseline_har, baseline_persistence,
    baseline_mean, n_test, vs_har} of the winner; "vs_initial" with the space's first initial point's trial; with
    two or more seed `members` (the winner first) "ensemble": {trials, val_loss, test_loss, member_test_losses,
    n_members}. vs_*: {trial_id (of the reference, vs_initial only), test_loss, ratio, dm_stat, dm_pvalue, dm_lags and
    their _wide twins (see versus)}, the winner's loss over the reference's; vs_initial with n_test too where the
    initial trial trained on other data settings (`initial_data`)."""
    fs = storage_filesystem(ray_storage)
    horizon = overlap(data.summary["target"], data.summary["horizon"])
    with tempfile.TemporaryDirectory(prefix="mamba-tune-test-") as tmp:
        best = stage_record_best(fs, train_storage, winner, Path(tmp) / "best.pt")
        if best is None:
            raise LookFailed(f"trial {winner.trial_id}'s best.pt is not in {train_storage}")
        losses = losses_on_test_segment([best], data)  # (n_test,)
        scores = {"trial_id": winner.trial_id, "best_epoch": winner.best_epoch, "objective": data.objective,
                  **score_losses(losses, data), "vs_har": versus(losses, har_losses(data), horizon)}
        if initial is not None and initial.trial_id != winner.trial_id:  # the winner untuned: nothing to compare
            reference = stage_record_best(fs, train_storage, initial, Path(tmp) / "initial.pt")
            if reference is not None:
                own = initial_data if initial_data is not None else data
                theirs = losses_on_test_segment([reference], own)  # (n_test of own,)
                mine, theirs = on_common_test_samples(losses, data, theirs, own)
                scores["vs_initial"] = {"trial_id": initial.trial_id, **versus(mine, theirs, horizon),
                                        **({} if own is data else {"n_test": len(mine)})}
        if len(members) > 1:
            staged = [best, *(stage_record_best(fs, train_storage, m, Path(tmp) / f"member-{i}.pt")
                              for i, m in enumerate(members[1:], 1))]
            if all(path is not None for path in staged):
                scores["ensemble"] = {"trials": [m.trial_id for m in members], **score_ensemble(staged, data)}
    return scores


def on_common_test_samples(errors: np.ndarray, data: Dataset, their_errors: np.ndarray,
                           their_data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Two models' per-sample losses (the objective's) on the test segment, each on the Dataset it trained on: errors
    (n_test,) on `data` and their_errors (their n_test,) on `their_data`; -> both (n_common,) on the test samples both
    forecast, in `data`'s units. The same Dataset: both as they are. Samples are matched by their last input bar (the
    same target: the horizon, target and objective are never searched); a loss in one Dataset's units is one in the
    other's times `_rescale`."""
    if their_data is data:
        return errors, their_errors
    _, mine, theirs = np.intersect1d(data.test_index, their_data.test_index, assume_unique=True, return_indices=True)
    return errors[mine], their_errors[theirs] * _rescale(data, their_data)


def _rescale(data: Dataset, their_data: Dataset) -> float:
    """What turns a loss in `their_data`'s units into one in `data`'s: a squared error of scaled targets (mse_log,
    mse) the ratio of their training targets' variances; mse_var's (in units of v̄²) the square of the ratio of their
    v̄; QLIKE's none (a function of σ²/h alone, whatever the scaling)."""
    if data.objective == "qlike":
        return 1.0
    if data.objective == "mse_var":
        return (their_data.objective_scale.variance_mean / data.objective_scale.variance_mean) ** 2
    return (their_data.scaler.target_std / data.scaler.target_std) ** 2


def initial_trial(records: list[TrialRecord], space: SweepSpace) -> TrialRecord | None:
    """The search trial of the space's first initial point (the untuned configuration); None without one."""
    if not space.initial:
        return None
    point = space.initial[0]
    return next((r for r in records if r.stage == "search" and all(
        _same(r.params.get(key), value) for key, value in point.items())), None)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
    return a == b
