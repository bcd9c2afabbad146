"""Where MLflow keeps runs: the embedded store (SQLite + a local artifact folder under runs/) or a server.

    default            sqlite:///<runs/mlflow>/mlflow.db, artifacts in runs/mlflow/artifacts/<experiment>
    --tracking-uri     http(s)://HOST:PORT of an `mlflow server` (or MLFLOW_TRACKING_URI); the server
                       decides where artifacts go (its --artifacts-destination, e.g. s3://...)

Every MLflow call of a sweep is made by its driver (tuning/tracking/runs.py), so trial workers on
other nodes never need the store; what they produce reaches it through the driver.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tuning.errors import UsageError
from tuning.uri_secrets import TRACKING_CREDENTIALS, refuse_credentials, without_secrets

if TYPE_CHECKING:
    from mlflow import MlflowClient

DEFAULT_TRACKING_DIR = "runs/mlflow"  # the embedded store, relative to where mamba-tune runs
DATABASE = "mlflow.db"
ARTIFACTS = "artifacts"
MLFLOW_DEFAULTS = {  # unless set: MLflow's own retries hold a dead server for minutes, ours run in the background
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # a "View run at" line per ended run is not ours to print
}
PROBE_TIMEOUT_S = 5
EPOCH_METRICS = ("train_loss", "val_loss", "best_val_loss", "lr", "overfit_ratio", "samples_per_s", "epoch_s",
                 "peak_memory_mb")  # what every run logs per epoch (step = epoch): sweep trials and production runs
KIND_TAG, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"  # not MLflow 3's GenAI pages


@dataclass(frozen=True)
class TrackingStore:
    uri: str  # what MLflow's client is given
    artifact_root: str | None  # embedded store: the artifact folder's file:// URI; a server decides its own

    @property
    def embedded(self) -> bool:
        return self.artifact_root is not None

    def describe(self) -> str:
        if self.embedded:
            return f"{self.uri} (browse: mamba-tune ui)"
        return f"{self.uri} (its UI is served there)"

    def client(self) -> MlflowClient:
        from mlflow import MlflowClient

        logging.getLogger("mlflow").setLevel(logging.WARNING)  # its database-migration chatter is not ours to print
        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)

    def experiment_id(self, client: MlflowClient, name: str) -> str:
        """The experiment named `name`, created (with its artifact folder, when embedded) if missing."""
        found = client.get_experiment_by_name(name)
        if found is None:
            location = f"{self.artifact_root}/{name}" if self.artifact_root else None
            experiment_id = client.create_experiment(name, artifact_location=location)
        elif found.lifecycle_stage == "deleted":
            raise UsageError(f"MLflow experiment {name!r} was deleted in {self.uri}; restore it (`mlflow experiments "
                             f"restore --experiment-id {found.experiment_id}`) or delete it for good (`mlflow gc`)")
        else:
            experiment_id = found.experiment_id
        if found is None or found.tags.get(KIND_TAG) != MODEL_TRAINING:
            client.set_experiment_tag(experiment_id, KIND_TAG, MODEL_TRAINING)  # the UI opens on the runs table
        return experiment_id


def resolve_store(uri: str | None = None, folder: str | Path = DEFAULT_TRACKING_DIR) -> TrackingStore:
    """--tracking-uri, else MLFLOW_TRACKING_URI, else the embedded store in `folder`."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or None
    for key, value in MLFLOW_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if uri is None:
        root = Path(folder).expanduser().resolve()
        return TrackingStore(f"sqlite:///{root / DATABASE}", (root / ARTIFACTS).as_uri())
    refuse_credentials("tracking URI (--tracking-uri or MLFLOW_TRACKING_URI)", uri, TRACKING_CREDENTIALS)  # any scheme
    if uri.startswith(("http://", "https://")):
        return TrackingStore(uri.rstrip("/"), None)
    if uri.startswith("sqlite:///"):
        root = Path(uri.removeprefix("sqlite:///")).expanduser().resolve().parent
        return TrackingStore(uri, (root / ARTIFACTS).as_uri())
    raise UsageError(f"tracking URI {without_secrets(uri)!r} (--tracking-uri or MLFLOW_TRACKING_URI): use "
                     "http(s)://HOST:PORT of an `mlflow server`, or sqlite:///PATH for a local store; leave both unset "
                     "for the embedded store in runs/mlflow")


def open_store(store: TrackingStore) -> MlflowClient:
    """A client for `store`, checked once: an unreachable server fails here, within seconds."""
    if store.embedded:
        Path(store.artifact_root.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    client = store.client()
    try:
        with _quick_requests():
            client.search_experiments(max_results=1)
    except Exception as exc:  # connection refused, timeout, HTTP error, unreadable database
        raise UsageError(f"tracking store {store.uri}: not reachable ({first_line(exc)}); start the server "
                         "(`mlflow server --host 127.0.0.1 --port 5000`), fix --tracking-uri, or leave it out for "
                         "the embedded store") from None
    return client


@contextmanager
def _quick_requests():
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(PROBE_TIMEOUT_S)})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def first_line(exc: BaseException) -> str:
    """An exception's first line, at most 200 characters: for one-line messages."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:200] + "..."
