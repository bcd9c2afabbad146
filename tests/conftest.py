"""Every test's MLflow writes go to a store of the test session's own, never to runs/mlflow of the checkout."""

from __future__ import annotations

import os

import pytest


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
