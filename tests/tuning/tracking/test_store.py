"""Where MLflow keeps runs: the embedded default under runs/, a server, and what is refused."""

from __future__ import annotations

import pytest

from tuning.errors import UsageError
from tuning.tracking.store import open_store, resolve_store


def test_resolve_store_defaults_to_sqlite_and_artifacts_under_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = resolve_store(None, tmp_path / "runs" / "mlflow")
    assert store.uri == f"sqlite:///{tmp_path / 'runs' / 'mlflow' / 'mlflow.db'}"
    assert store.artifact_root == (tmp_path / "runs" / "mlflow" / "artifacts").as_uri() and store.embedded


def test_resolve_store_takes_a_server_from_the_environment(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://10.0.0.5:5000/")
    store = resolve_store(None)
    assert (store.uri, store.embedded) == ("http://10.0.0.5:5000", False)


def test_resolve_store_refuses_other_schemes():
    with pytest.raises(UsageError, match="tracking URI 'file:///tmp/mlruns' .* use http"):
        resolve_store("file:///tmp/mlruns")


def test_experiment_id_creates_it_with_an_artifact_folder_and_refuses_a_deleted_one(tmp_path):
    store = resolve_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = open_store(store)
    experiment_id = store.experiment_id(client, "sweep-a")
    assert store.experiment_id(client, "sweep-a") == experiment_id  # found, not created twice
    experiment = client.get_experiment(experiment_id)
    assert experiment.artifact_location == f"{(tmp_path / 'artifacts').as_uri()}/sweep-a"
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    client.delete_experiment(experiment_id)
    with pytest.raises(UsageError, match="MLflow experiment 'sweep-a' was deleted"):
        store.experiment_id(client, "sweep-a")
