"""One validation set for every trial: two trials of a sweep searching data.window, their Datasets built as a trial's
workers build them (tuning/sweep/trial_worker.py), score the same samples with the same HAR; so do a finalist's
confirmation runs on a later fold, and the look's Datasets (tuning/sweep/sweep_data.py data_of)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.bars import read_bars
from model.data import load_dataset
from tests.bars import write_bars
from tuning.search.recipe import TrainingRecipe
from tuning.search.space import parse_space, with_params
from tuning.sweep import trial_worker
from tuning.sweep.sweep_data import data_of

WINDOWS = (32, 256)
SPACE = {"search": {"learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
                    "data.window": {"choices": list(WINDOWS)}},
         "run": {"data": {"window": 64, "horizon": 12}}, "confirm": {"top_k": 1, "folds": 2}}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(the parsed space, the bars' path, the sweep's shared Dataset, its bars) as the session loads them."""
    path = write_bars(tmp_path_factory.mktemp("data") / "bars.parquet", 4000, seed=3)
    space = parse_space(SPACE, "space.yaml")
    return space, path, load_dataset(path, space.run.data), read_bars(path, space.run.data.columns)


def trial_dataset(sweep, params: dict, monkeypatch):
    """The Dataset a trial of `params` trains on, built by the code its Tune trial and Ray Train workers run
    (tuning/sweep/trainable.py run_trial's config, trial_worker.worker_dataset), the object store left out."""
    space, _, shared, bars = sweep
    run = with_params(TrainingRecipe.from_dict(space.run.to_dict()), params)  # run_trial
    config = {"run": run.to_dict(), "dataset": shared, "bars": bars}  # what the trial's workers are handed
    monkeypatch.setattr(trial_worker.ray, "get", lambda ref: ref)  # the refs are the objects themselves here
    return trial_worker.worker_dataset(config, TrainingRecipe.from_dict(config["run"]))


@pytest.mark.parametrize("fold", [1, 2], ids=["search-trials", "fold-2-confirmation-runs"])
def test_trials_with_windows_32_and_256_score_the_same_samples_and_the_same_har(sweep, fold, monkeypatch):
    _, path, shared, _ = sweep
    extra = {} if fold == 1 else {"seed": 1, "fold": 2, "finalist": "t0"}
    short, long = (trial_dataset(sweep, {"learning_rate": 1e-3, "data.window": w, **extra}, monkeypatch)
                   for w in WINDOWS)
    assert (short.window, long.window, short.summary["fold"]) == (*WINDOWS, fold)  # each reads its own window
    timestamps = read_bars(path).timestamp
    assert np.array_equal(timestamps[short.val_index], timestamps[long.val_index])  # the same validation bars
    assert len(short.val_index) == len(long.val_index) == long.summary["n_val"] > 0
    assert np.array_equal(short.train_index, long.train_index) and np.array_equal(short.test_index, long.test_index)
    torch.testing.assert_close(short.baseline_metrics(), long.baseline_metrics())  # one baseline_har per fold
    torch.testing.assert_close((short.scaler.target_mean, short.scaler.target_std),  # their inputs differ (the
                               (long.scaler.target_mean, long.scaler.target_std))  # lookbacks that fit)
    if fold == 1:  # the sweep's shared Dataset (its MLflow run's baselines) scores the same samples too
        assert np.array_equal(shared.val_index, short.val_index)
        torch.testing.assert_close(shared.baseline_metrics(), short.baseline_metrics())


def test_the_looks_datasets_share_their_test_samples(sweep):
    space, _, shared, _ = sweep
    short, long = (data_of(space, shared, {"learning_rate": 1e-3, "data.window": w}) for w in WINDOWS)
    assert np.array_equal(short.test_index, long.test_index) and len(short.test_index) > 0
    torch.testing.assert_close(short.test_baselines, long.test_baselines)
    torch.testing.assert_close(torch.from_numpy(short.test_har), torch.from_numpy(long.test_har))


def test_resume_of_a_sweep_validated_on_each_windows_own_samples_says_why_it_cannot_continue(sweep, tmp_path):
    from model.data import DataConfig
    from tuning.errors import UsageError
    from tuning.sweep import session
    from tuning.sweep_files import sweep_paths

    space, path, shared, _ = sweep
    paths = sweep_paths(str(tmp_path / "sweeps"), "space")
    paths.folder.mkdir(parents=True)
    manifest = session.write_manifest(paths, path, SPACE, 16, shared, "sqlite:///m.db")
    assert session.load_for_resume(paths, manifest)[2].summary == shared.summary  # aligned now: it continues
    before = load_dataset(path, DataConfig.from_dict({**space.run.data.to_dict(), "align_window": None}))
    older = session.write_manifest(paths, path, SPACE, 16, before, "sqlite:///m.db")  # as an earlier version wrote
    with pytest.raises(UsageError, match=r"^sweep 'space' searches data.window and was started by an earlier "
                                         r"mamba-tune, .*; finish it with that version or start it again$"):
        session.load_for_resume(paths, older)
