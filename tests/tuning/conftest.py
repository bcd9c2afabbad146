"""Fixtures of the tuning tests: the session's shared sweep."""

from __future__ import annotations

import pytest

from tests.cli import run_cli


@pytest.fixture(scope="session")
def finished_sweep(bars, tmp_path_factory):
    """The 5-trial sweep of tests.tuning.sweeps.SPACE, one trial at a time, run once per session into an embedded
    MLflow store.

    -> (folder, storage, tracking_uri, completed process)
    """
    from tests.tuning.sweeps import write_space

    folder = tmp_path_factory.mktemp("sweep")
    storage, uri = folder / "sweeps", f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}"
    # One trial at a time: ASHA's decisions depend on the order trials reach a rung, and this order is then fixed.
    space = write_space(folder, resources={"max_concurrent": 1})
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, storage, uri, done
