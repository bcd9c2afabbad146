"""Which bars a run trained on, as an MLflow dataset input: the Datasets column of the UI, `run.inputs`.

A dataset is named after the file, identified by the first 16 hex digits of its SHA-256 (the
same bytes, the same digest, wherever the file is) and sourced at its path (or its s3:// or gs:// URI); its
profile is the data summary of the run's split where there is one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from model.bars_location import is_remote
from tuning.bars_file import sha256_of

CONTEXT_TAG = "mlflow.data.context"  # MLflow's tag for what the run did with the dataset


@dataclass(frozen=True)
class BarsInput:
    name: str  # the file's stem
    digest: str  # file_digest
    source: str  # a file:// URI, or the object's s3:// or gs:// URI
    profile: str  # JSON: rows, and the split's sample counts where known


def bars_input(path: str | Path, summary: dict[str, Any] | None = None, sha256: str | None = None) -> BarsInput:
    """The bars file at `path` as a dataset; `summary` (the Dataset's) adds its split to the profile; `sha256`,
    the file's when known (a sweep's manifest keeps it), spares reading it again."""
    keys = ("n_bars", "n_train", "n_val", "n_test", "target", "horizon", "window")
    profile = json.dumps({k: summary[k] for k in keys if summary and k in summary})
    if is_remote(path):
        return BarsInput(PurePosixPath(path.partition("?")[0]).stem, (sha256 or sha256_of(path))[:16], path, profile)
    path = Path(path).resolve()
    return BarsInput(path.stem, (sha256 or sha256_of(path))[:16], path.as_uri(), profile)


def file_digest(path: str | Path) -> str:
    """The first 16 hex digits of the file's (or object's) SHA-256: which bars, exactly."""
    return sha256_of(path)[:16]


def dataset_input(bars: BarsInput, context: str) -> Any:
    """An mlflow.entities.DatasetInput of `bars`, tagged with its context (training, evaluation)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    dataset = Dataset(bars.name, bars.digest, "local", json.dumps({"uri": bars.source}), None, bars.profile)
    return DatasetInput(dataset, [InputTag(CONTEXT_TAG, context)])
