"""Which bars a run trained on, as an MLflow dataset input: the Datasets column of the UI, `run.inputs`.

A dataset is named after the file, identified by the first 16 hex digits of its SHA-256 (the
same bytes, the same digest, wherever the file is) and sourced at its path; its profile is
the data summary of the run's split where there is one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
CONTEXT_TAG = "mlflow.data.context"  # MLflow's tag for what the run did with the dataset


@dataclass(frozen=True)
class BarsInput:
    name: str  # the file's stem
    digest: str  # file_digest
    source: str  # a file:// URI
    profile: str  # JSON: rows, and the split's sample counts where known


def bars_input(path: str | Path, summary: dict[str, Any] | None = None) -> BarsInput:
    """The bars file at `path` as a dataset; `summary` (the Dataset's) adds its split to the profile."""
    path = Path(path).resolve()
    keys = ("n_bars", "n_train", "n_val", "n_test", "target", "horizon", "window")
    profile = {k: summary[k] for k in keys if summary and k in summary}
    return BarsInput(path.stem, file_digest(path), path.as_uri(), json.dumps(profile))


def file_digest(path: str | Path) -> str:
    """The first 16 hex digits of the file's SHA-256: which bars, exactly."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def dataset_input(bars: BarsInput, context: str) -> Any:
    """An mlflow.entities.DatasetInput of `bars`, tagged with its context (training, evaluation)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    dataset = Dataset(bars.name, bars.digest, "local", json.dumps({"uri": bars.source}), None, bars.profile)
    return DatasetInput(dataset, [InputTag(CONTEXT_TAG, context)])
