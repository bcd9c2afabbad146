"""The production run in MLflow, and its model registered as a new version of a named model.

    experiment "production" (--experiment)
      run "train <out>"    tags mamba_tune.role=production, mamba_tune.data, mamba_tune.out, mamba_tune.best_epoch,
                           mamba_tune.objective (what its losses are in: tuning/tracking/objective.py)
                           params data.*, model.*, train.* (the run configuration)
                           metrics every epoch with step=epoch (0: before training), the losses as
                           train_loss_<objective>, val_loss_<objective>, best_val_loss_<objective>
                           artifacts config.yaml, metrics.json
      logged model "model" (MLflow 3 keeps it beside the run, under <experiment>/models/<model id>):
                           a pyfunc of tuning/tracking/pyfunc_model.py + the `model` package + best.pt
                           (a seed ensemble: its members' best.pt too, checkpoint_1, ...),
                           with its input example, signature (the bar columns) and pinned requirements
    Model Registry         <name> version N, one per registered run, from that logged model, tagged as its run
                           (its objective too: `promote` scores both versions under the challenger's) and
                           with the first and last timestamps of the bars it trained on (`promote` takes only
                           later bars); an alias (e.g. challenger) when one is given
    `best --register` logs a sweep's winner the same way (tuning/sweep/ship_winner.py): its trial's best.pt,
    no training; the run tags name the sweep, the trial, the data digest, the val and test losses, and
    which look at the test segment judged it (mamba_tune.judged_by=none: registered with --no-look).

Loading needs neither mamba-tune nor this repository: mlflow.pyfunc.load_model("models:/<name>/<N>"), or
"models:/<name>@<alias>".
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import model
from model.bars import FIELDS, OPTIONAL_FIELDS, Bars, bars_from_table, read_bars
from model.bars_location import is_remote, location_text, open_object
from model.train import FitResult
from tuning.errors import UsageError
from tuning.search.recipe import TrainingRecipe
from tuning.tracking.lineage import bars_input, dataset_input
from tuning.tracking.objective import OBJECTIVE_TAG, metric_key
from tuning.tracking.store import EPOCH_METRICS, TrackingStore

DEFAULT_EXPERIMENT = "production"
CONFIRMATION_TAG = "mamba_tune.confirmation"  # a sweep winner's: confirmed, or unconfirmed (`best --unconfirmed`)
JUDGED_TAG = "mamba_tune.judged_by"  # a sweep winner's: "look K of N" at the test segment, or NO_LOOK
NO_LOOK = "none"  # registered by `best --register --no-look`: never scored on the test segment
DIGEST_TAG = "mamba_tune.data_digest"  # the run's and version's: the bars' digest (tuning/tracking/lineage.py)
FIRST_BAR_TAG = "mamba_tune.data_first_bar_ns"  # a version's tag: the first bar (int64 ns, UTC) of the bars it
LAST_BAR_TAG = "mamba_tune.data_last_bar_ns"  # trained on, and the last: what `promote` compares new bars with
PYFUNC_FILE = Path(__file__).with_name("pyfunc_model.py")  # the model's code, logged as a file: nothing pickled
MODEL_PACKAGE = Path(model.__file__).parent  # shipped with the model, so it loads where mamba-tune is not installed
REQUIREMENTS = ("mlflow", "torch", "numpy", "pandas", "pyarrow")  # what pyfunc_model.py and `model` import
EXAMPLE_EXTRA_BARS = 4  # the input example: a first bar, one window, and these bars more
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,255}")
_VERSION_LIKE = re.compile(r"[vV]\d+")


@dataclass(frozen=True)
class Registered:
    run_id: str
    experiment_id: str
    name: str
    version: int

    @property
    def model_uri(self) -> str:
        return f"models:/{self.name}/{self.version}"


def check_model_name(name: str) -> str:
    """`name` if it can name a registered model here (letters, digits, '-', '_', '.'), else a UsageError."""
    if not _NAME.fullmatch(name) or len(name) > 256:
        raise UsageError(f"--register {name!r}: a model name is 1 to 256 letters, digits, '-', '_' or '.'; "
                         "choose one such as mamba-forecaster")
    return name


@dataclass(frozen=True)
class Shipment:
    """A trained model to log as a run and register: its best.pt, the files logged beside it, its history."""

    config: TrainingRecipe
    data_path: str | Path  # the bars it trained on, a path or a URI (its first rows are the model's input example)
    checkpoint: Path  # best.pt
    files: tuple[Path, ...]  # logged as the run's artifacts (config.yaml, metrics.json)
    history: list[dict[str, Any]]  # one dict per epoch, as fit reports them
    best_epoch: int
    run_name: str
    tags: dict[str, str]  # on the run and on the model version (with the data's digest, DIGEST_TAG)
    description: str | None = None  # the model version's (markdown)
    members: tuple[Path, ...] = ()  # a seed ensemble's other best.pt files: the model forecasts the mean of all


def register_run(store: TrackingStore, experiment: str, model_name: str, config: TrainingRecipe,
                 data_path: str | Path, out_dir: Path, result: FitResult, alias: str | None = None) -> Registered:
    """Log the finished `train` run in `out_dir` (config.yaml, metrics.json, best.pt) and register its model."""
    tags = {"mamba_tune.role": "production", "mamba_tune.data": location_text(data_path),
            "mamba_tune.out": str(Path(out_dir).resolve()), "mamba_tune.best_epoch": str(result.best_epoch)}
    if config.tuned is not None:  # a sweep's winner trained again: which, and whether the sweep confirmed it
        tags.update({"mamba_tune.sweep": config.tuned.sweep, "mamba_tune.trial": config.tuned.trial,
                     CONFIRMATION_TAG: "unconfirmed" if config.tuned.unconfirmed else "confirmed"})
    return register_model(store, experiment, model_name, Shipment(
        config, data_path, out_dir / "best.pt", (out_dir / "config.yaml", out_dir / "metrics.json"), result.history,
        result.best_epoch, f"train {out_dir.name}", tags), alias=alias)


def register_model(store: TrackingStore, experiment: str, model_name: str, shipment: Shipment,
                   alias: str | None = None) -> Registered:
    """Log `shipment` as a run of `experiment` and register its model as a new version of `model_name`,
    tagged with `shipment.tags` and, when given, pointed to by `alias` (moved from any version it named).

    The run ends FINISHED once the model version exists; a failure on the way ends it FAILED.
    """
    import mlflow
    from mlflow.entities import Metric, Param

    client = store.client()
    experiment_id = store.experiment_id(client, experiment)
    example = input_example(shipment.data_path, shipment.config)
    bars = bars_input(shipment.data_path)  # the file hashed once: the run's dataset input and its digest tag
    objective = shipment.config.data.loss
    tags = {**shipment.tags, DIGEST_TAG: bars.digest, OBJECTIVE_TAG: objective}
    params = {f"{section}.{key}": str(value) for section, values in shipment.config.to_dict().items()
              for key, value in values.items()}
    now = int(time.time() * 1000)
    metrics = [Metric(metric_key(key, objective), float(m[key]), now, int(m["epoch"])) for m in shipment.history
               for key in EPOCH_METRICS if key in m]
    with mlflow_settings(store.uri), mlflow.start_run(experiment_id=experiment_id, run_name=shipment.run_name,
                                                    tags=tags) as run:
        run_id = run.info.run_id
        client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()], synchronous=True)
        for start in range(0, len(metrics), 1000):  # a batch holds at most 1000 metrics
            client.log_batch(run_id, metrics=metrics[start:start + 1000], synchronous=True)
        for path in shipment.files:
            client.log_artifact(run_id, str(path))
        client.log_inputs(run_id, [dataset_input(bars, "training")])
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(PYFUNC_FILE),  # models from code: the file is the model's code
            artifacts={"checkpoint": str(shipment.checkpoint.resolve()),  # pyfunc_model.py averages every checkpoint*
                       **{f"checkpoint_{i}": str(path.resolve()) for i, path in enumerate(shipment.members, 1)}},
            code_paths=[str(MODEL_PACKAGE)],  # importable beside the model's code when it loads
            input_example=example,  # saved with the model; MLflow checks that it predicts
            signature=signature(),
            pip_requirements=requirements(),
            registered_model_name=model_name,  # a new version of it
            step=shipment.best_epoch,
        )
        version = int(info.registered_model_version)
        timestamps = read_bars(shipment.data_path, shipment.config.data.columns).timestamp
        version_tags = {**tags, FIRST_BAR_TAG: str(int(timestamps[0])),  # `promote` scores only on bars after the
                        LAST_BAR_TAG: str(int(timestamps[-1]))}  # last, whatever file or name they come in
        for key, value in version_tags.items():
            client.set_model_version_tag(model_name, str(version), key, value)
        if shipment.description:
            client.update_model_version(model_name, str(version), description=shipment.description)
        if alias is not None:
            client.set_registered_model_alias(model_name, alias, str(version))
    return Registered(run_id, experiment_id, model_name, version)


def check_alias(alias: str) -> str:
    """`alias` if MLflow can name a model version by it, else a UsageError."""
    if not _ALIAS.fullmatch(alias) or alias.lower() == "latest" or _VERSION_LIKE.fullmatch(alias):
        raise UsageError(f"--alias {alias!r}: an alias is 1 to 255 letters, digits, '_' or '-', not 'latest' and not "
                         "a version such as v3; choose one such as challenger")
    return alias


def input_example(data_path: str | Path, config: TrainingRecipe) -> pd.DataFrame:
    """The first window + 1 + EXAMPLE_EXTRA_BARS bars of the training data, as the model takes them.

    Logged with the model, as the documentation of its input.
    """
    rows = config.data.window + 1 + EXAMPLE_EXTRA_BARS
    batches, have = [], 0
    source = open_object(data_path) if is_remote(data_path) else data_path
    for batch in pq.ParquetFile(source).iter_batches(batch_size=rows):  # only the first rows are read
        batches.append(batch)
        have += batch.num_rows
        if have >= rows:
            break
    first = pa.Table.from_batches(batches).slice(0, rows)
    return bars_frame(bars_from_table(first, str(data_path), config.data.columns))


def bars_frame(bars: Bars) -> pd.DataFrame:
    """Validated bars as the DataFrame the model predicts on: timestamp (UTC, timezone-naive: MLflow's datetime
    type has no timezone), prices and volume as float64; no volume column for bars without volume."""
    return pd.DataFrame({"timestamp": pd.to_datetime(bars.timestamp), "open": bars.open, "high": bars.high,
                         "low": bars.low, "close": bars.close, **({"volume": bars.volume} if bars.has_volume else {})})


def signature():
    """The six bar columns of any type, each required but volume (a model trained without volume reads none; one
    trained with it refuses bars without it): MLflow's inferred types would refuse the bars `pd.read_parquet`
    gives (a timezone-aware timestamp, int64 volume); the model validates them as `read_bars` validates a file."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, Schema

    return ModelSignature(inputs=Schema([ColSpec(AnyType(), field, required=field not in OPTIONAL_FIELDS)
                                         for field in FIELDS]),
                          outputs=Schema([ColSpec("datetime", "timestamp"), ColSpec("double", "prediction")]))


def requirements() -> list[str]:
    """Pinned pip requirements of the logged model (given, so MLflow does not infer them by loading it)."""
    pins = []
    for package in REQUIREMENTS:
        try:
            pins.append(f"{package}=={version(package).split('+')[0]}")  # torch's "+cpu" names a wheel index
        except PackageNotFoundError:
            pins.append(package)
    return pins


@contextmanager
def mlflow_settings(uri: str) -> Iterator[None]:
    """MLflow's fluent API (start_run, log_model) writes to the process-wide tracking and registry URIs,
    which it mirrors in MLFLOW_TRACKING_URI and MLFLOW_REGISTRY_URI: point them at `uri`, then put them
    back. Meanwhile no artifact progress bars (log_model's check of the input example draws one)."""
    import mlflow

    keys = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    saved = {key: os.environ.get(key) for key in keys}
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(saved["MLFLOW_TRACKING_URI"])  # None: MLflow's default again
        mlflow.set_registry_uri(saved["MLFLOW_REGISTRY_URI"])
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
