"""SweepManifest: what `resume` and `best` need of a sweep, kept as `sweep.json` in its folder.

The file is JSON with these keys (`sweep_id`, `tracking_uri` and `memory_probe` are absent
from files written by older versions: the id is then the creation time, the store the
default one, and there was no probe; `stages` is there once `resume --trials` extended the
sweep: the trials asked for by the first run and by each extension, cumulative; `study_url` is there when
the Optuna study is in a database of its own, `--study-url`; `warm_start` is there when the sweep was
warm-started from another (tuning/sweep/warm_start.py: its name, storage, trials added, winner enqueued); `bars`,
absent from older files, identifies the
bars file by content: its SHA-256, rows, first and last bar). A sweep whose
`data_identity` has no `residual_to` predates the volatility and HAR inputs: its space is read
with `data: {vol_lookbacks: [], residual_to: none, leverage_lookbacks: []}`, the bar features it
trained on. One with `residual_to` but no `leverage_lookbacks` predates the mean-fall inputs
alone: its space is read with `data: {leverage_lookbacks: []}`.

A webhook URL (a secret) is never kept: `webhook_set` is there, true, when the sweep was started with one, and its
space has no `notify` section. A file written by an older version may hold the URL in `space.notify.webhook`: it is
read into `legacy_webhook` (never written back: the next write of the file drops it), `webhook_set` is true, and the
space is read without its notify section; `resume` tells that webhook once and writes the file without it
(docs/notifications.md). A notify section with no URL in it (`notify: null`, no `webhook`) set no webhook.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from model.bars_location import location_text
from tuning.errors import UsageError
from tuning.search.study_store import study_exists
from tuning.sweep.record_copies import fetch_records
from tuning.sweep_files import MANIFEST, SweepPaths, is_uri, storage_holds


@dataclass(frozen=True)
class SweepManifest:
    name: str
    data: str  # the bars file, an absolute path, or the URI of an object (s3://, gs://) as given
    space: dict[str, Any]  # the space as run (without the batch sizes the memory probe removed)
    trials: int
    ray_storage: str  # where Ray Tune and Train keep the sweep: a folder or a URI such as s3://...
    tracking_uri: str | None  # the MLflow store the sweep logs to; `resume` logs there too (None: the default)
    data_identity: dict[str, Any]  # model/training.py's data_identity: resume refuses other data
    created: str  # ISO time, UTC, seconds
    sweep_id: str  # tags the sweep's MLflow runs: a sweep started again under the same name gets its own
    memory_probe: dict[str, Any] | None = None  # tuning/sweep/memory_probe.py's ProbeResult.to_dict(), when one ran
    stages: tuple[int, ...] = ()  # cumulative trials of the first run and each `resume --trials`; () = (trials,)
    study_url: str | None = None  # the Optuna study's database (--study-url); None: optuna.db in the sweep folder
    bars: dict[str, Any] | None = None  # the bars file by content (tuning/bars_file.py): sha256, rows, first/last bar
    webhook_set: bool = False  # the sweep was started with a webhook (its URL, a secret, is not kept)
    # `sweep --warm-start`: the sweep it started from, its storage, the trials added and the winner enqueued
    warm_start: dict[str, Any] | None = None
    # The URL an older version kept in space.notify.webhook, read to be told once by `resume`; never written
    legacy_webhook: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def new(cls, name: str, data_path: str | Path, space: dict[str, Any], trials: int, ray_storage: str,
            tracking_uri: str, data_identity: dict[str, Any], memory_probe: dict[str, Any] | None,
            study_url: str | None = None, bars: dict[str, Any] | None = None,
            webhook_set: bool = False, warm_start: dict[str, Any] | None = None) -> SweepManifest:
        """The manifest of a new sweep; `space` without its notify section (the webhook is a secret)."""
        return cls(name, location_text(data_path), _without_notify(space), trials, ray_storage, tracking_uri,
                   data_identity, datetime.now(timezone.utc).isoformat(timespec="seconds"), uuid.uuid4().hex,
                   memory_probe, study_url=study_url, bars=bars, webhook_set=webhook_set, warm_start=warm_start)

    @property
    def bars_sha256(self) -> str | None:
        """The SHA-256 of the bars file the sweep ran on (None: a sweep from before it was kept)."""
        return self.bars["sha256"] if self.bars else None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SweepManifest:
        known = {f.name for f in dataclasses.fields(cls)} - {"legacy_webhook"}
        values = {k: v for k, v in values.items() if k in known}
        if isinstance(values.get("space"), dict) and "notify" in values["space"]:  # an older version kept the URL
            notify = values["space"]["notify"]
            legacy = notify.get("webhook") if isinstance(notify, dict) else None
            legacy = legacy if isinstance(legacy, str) and legacy.strip() else None  # notify: null set none
            values = {**values, "space": _without_notify(values["space"]), "legacy_webhook": legacy,
                      "webhook_set": bool(values.get("webhook_set")) or legacy is not None}
        if "residual_to" not in values["data_identity"]:
            values = {**values, "space": _pinned_inputs(values["space"], vol_lookbacks=[], residual_to="none")}
        if "leverage_lookbacks" not in values["data_identity"]:
            values = {**values, "space": _pinned_inputs(values["space"], leverage_lookbacks=[])}
        return cls(**{"tracking_uri": None, **values, "sweep_id": values.get("sweep_id") or values["created"],
                      "stages": tuple(values.get("stages") or ())})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of sweep.json, in the key order earlier versions wrote."""
        values = {"name": self.name, "sweep_id": self.sweep_id, "data": self.data, "space": self.space,
                  "trials": self.trials, "ray_storage": self.ray_storage, "tracking_uri": self.tracking_uri,
                  "data_identity": self.data_identity, "created": self.created}
        return {**values, **({"memory_probe": self.memory_probe} if self.memory_probe else {}),
                **({"stages": list(self.stages)} if len(self.stages) > 1 else {}),
                **({"study_url": self.study_url} if self.study_url else {}),
                **({"bars": self.bars} if self.bars else {}),
                **({"webhook_set": True} if self.webhook_set else {}),
                **({"warm_start": self.warm_start} if self.warm_start else {})}

    @property
    def trial_stages(self) -> tuple[int, ...]:
        """The cumulative trials of each Tune experiment of the search: (5,), or (5, 8) once extended to 8."""
        return self.stages or (self.trials,)

    def extended(self, trials: int) -> SweepManifest:
        """The manifest of the sweep extended to `trials` search trials (more than it has)."""
        return dataclasses.replace(self, trials=trials, stages=(*self.trial_stages, trials))


def _without_notify(space: dict[str, Any]) -> dict[str, Any]:
    """The space without its notify section: the webhook URL it holds is a secret, kept nowhere."""
    return {k: v for k, v in space.items() if k != "notify"} if isinstance(space, dict) else space


def _pinned_inputs(space: dict[str, Any], **inputs: Any) -> dict[str, Any]:
    """The space of a sweep started before some inputs of model/features.py existed, with those inputs set
    (unless the space sets them) to what its trials began with, so that it resumes on the same inputs."""
    run = space.get("run") or {}
    return {**space, "run": {**run, "data": {**inputs, **(run.get("data") or {})}}}


def check_new(paths: SweepPaths) -> None:
    """Refuse a sweep whose name is taken: by a sweep here, by a Ray Tune experiment in its storage (started
    from another folder or head, whose resume it would break), or by a study in its --study-url database."""
    if (paths.folder / MANIFEST).exists():
        raise UsageError(f"a sweep named {paths.name!r} already exists in {paths.folder}; continue it with "
                         f"`mamba-tune resume {paths.name}` or start another with --name")
    if paths.study is not None and study_exists(paths.study, paths.name):
        raise UsageError(f"--study-url {paths.study} already holds an Optuna study named {paths.name!r}, another "
                         "sweep's; start this one with another --name, or resume that one")
    # A URI's sweep folder holds only what sweeps put there (its records' copy, Tune's state, checkpoints)
    location = paths.sweep_storage if is_uri(paths.ray_storage) else paths.experiment
    if storage_holds(location):
        raise UsageError(f"--storage {paths.ray_storage} already holds a sweep named {paths.name!r} "
                         f"({location}), started from another folder or machine; start this one with another "
                         f"--name, or resume that one (`mamba-tune resume {paths.name} --storage {paths.ray_storage}`)")


def read_manifest(paths: SweepPaths) -> SweepManifest:
    """The sweep's manifest; with a URI storage and no folder here, the records are fetched from the storage first
    (tuning/sweep/record_copies.py: the head that ran it may be gone)."""
    fetch_records(paths)
    if not (paths.folder / MANIFEST).exists():  # the commands refuse a local storage's first (listing.no_sweep_named)
        where = paths.ray_storage if is_uri(paths.ray_storage) else paths.folder.parent
        raise UsageError(f"no sweep named {paths.name!r} in {where}; list them with "
                         f"`mamba-tune list --storage {where}` or pass the --storage it was started with")
    return SweepManifest.from_dict(json.loads((paths.folder / MANIFEST).read_text()))

