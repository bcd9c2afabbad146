"""Shared by every test package: the session's own MLflow store (never runs/mlflow of the checkout), the
session's bars, and a real `mlflow server` per test."""

from __future__ import annotations

import os

import pytest

from tests.bars import write_bars

# Assertions in these helpers say what differed, as in the test modules themselves.
pytest.register_assert_rewrite("tests.tuning.mlflow_layout", "tests.processes")


@pytest.fixture(scope="session", autouse=True)
def session_tracking_store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    saved = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri  # inherited by the mamba-tune processes tests start
    yield uri
    if saved is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = saved


@pytest.fixture(scope="session")
def bars(tmp_path_factory):
    """1,500 synthetic bars in a Parquet file."""
    path = tmp_path_factory.mktemp("data") / "bars.parquet"
    write_bars(path, 1500, seed=1)
    return path


@pytest.fixture()
def mlflow_server(tmp_path):
    """A running `mlflow server` (tests.tuning.mlflow_server.MlflowServer), stopped at the end even on failure."""
    from tests.tuning.mlflow_server import MlflowServer

    folder = tmp_path / "mlflow-server"
    folder.mkdir()
    server = MlflowServer(folder)
    try:
        server.start()
        yield server
    finally:
        server.stop()
