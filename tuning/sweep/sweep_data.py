"""The Datasets of a sweep: the shared one, which `resume` reads again and accepts only with the samples the sweep
started with, and each trial's, built from the same bars with its own data settings. Which samples they all hold
is the rule of tuning/search/sample_alignment.py.
"""

from __future__ import annotations

from typing import Any

from model.data import DataConfig, Dataset, dataset_for, load_dataset
from model.training import data_identity
from tuning.errors import UsageError
from tuning.search.space import SweepSpace, with_params
from tuning.sweep.manifest import SweepManifest


def resumed_data(name: str, manifest: SweepManifest, settings: DataConfig) -> Dataset:
    """Sweep `name`'s shared Dataset read again from manifest.data (a path, or a URI read again:
    model/bars_location.py) with `settings` (its space's run.data); UsageError when its samples, inputs or scaling
    are not those it started with."""
    data = load_dataset(manifest.data, settings)
    if data_identity(data, keys=manifest.data_identity) != manifest.data_identity:
        refuse_unaligned_resume(name, manifest, settings)
        raise UsageError(f"{manifest.data} has changed since sweep {name!r} started, so its trials "
                         "cannot continue on it; restore the file or start a new sweep")
    return data


def refuse_unaligned_resume(name: str, manifest: SweepManifest, settings: DataConfig) -> None:
    """UsageError when sweep `name` searches data.window (`settings` align its samples) and was started by a
    mamba-tune older than sample alignment: its bars, validated without alignment, are the data it started with.
    Nothing otherwise (a sweep that searches no window, or whose bars changed)."""
    if settings.align_window is None:
        return
    unaligned = load_dataset(manifest.data, DataConfig.from_dict({**settings.to_dict(), "align_window": None}))
    if data_identity(unaligned, keys=manifest.data_identity) == manifest.data_identity:
        raise UsageError(f"sweep {name!r} searches data.window and was started by an earlier mamba-tune, "
                         "which validated each window on its own samples; a sweep now scores every trial on the "
                         "samples of its longest window, so it cannot continue; finish it with that version or "
                         "start it again")


def data_of(space: SweepSpace, data: Dataset, params: dict[str, Any]) -> Dataset:
    """The Dataset a trial with these parameters trained on: the sweep's, unless it searched data settings."""
    return dataset_for(data, space.run.data, data_settings(space, params))


def data_settings(space: SweepSpace, params: dict[str, Any]) -> DataConfig:
    """The data settings a trial with these parameters trained on."""
    return with_params(space.run, params).data
