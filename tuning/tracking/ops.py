"""The MLflow writes of a sweep, one frozen dataclass each, and the runs they write to.

Each operation knows how to apply itself (`apply(runs)`) and how it is kept in the spool
(`to_json`, `operation_from_json`: one JSON object per line, `"op"` naming its kind; the format
of the spools earlier versions wrote). Every one is idempotent: runs are found by key before
being created, a step a run already holds is skipped, tags and artifacts overwrite. So
replaying one that had been sent changes nothing.

Runs are named by keys: "sweep" for the parent run, the trial id for a trial's run; the
tags KEY_TAG and SWEEP_TAG find them again in a later driver (resume, spool replay).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from model.objectives import OBJECTIVES
from tuning.tracking.lineage import BarsInput, dataset_input
from tuning.tracking.objective import metric_key

SWEEP_KEY = "sweep"
KEY_TAG, SWEEP_TAG = "mamba_tune.key", "mamba_tune.sweep_id"
# A trial's per-step metric (val_loss_<objective>; val_loss before objectives) and the sweep's (trials_finished):
# which steps a run holds.
STEP_MARKERS = ("val_loss", *(metric_key("val_loss", o) for o in OBJECTIVES), "trials_finished")
LOOKS_MARKER = "test_looks"  # the sweep's looks at its test segment: steps of their own (look 1 at step 0, ...)


class SweepRuns:
    """The MLflow runs of one sweep, by key: found in the store, or created (only the sender thread uses it)."""

    def __init__(self, client: MlflowClient, experiment_id: str, sweep_id: str) -> None:
        self.client, self.experiment_id, self.sweep_id = client, experiment_id, sweep_id
        self.run_ids: dict[str, str] = {}
        self.logged_steps: dict[str, set[int]] = {}  # key -> the steps its run holds
        self.look_steps: dict[str, set[int]] = {}  # key -> the steps of its run's LOOKS_MARKER

    def run_id(self, key: str) -> str:
        if key not in self.run_ids:  # logged by an earlier run of the sweep (resume, spool replay)
            found = self.find(key)
            if found is None:
                raise MlflowException(f"no run for {key!r} in this sweep", error_code="RESOURCE_DOES_NOT_EXIST")
            self.run_ids[key] = found
        return self.run_ids[key]

    def find(self, key: str) -> str | None:
        """The run of `key` in the store (noting the steps it holds), or None."""
        runs = self.client.search_runs(
            [self.experiment_id], f"tags.`{KEY_TAG}` = '{key}' and tags.`{SWEEP_TAG}` = '{self.sweep_id}'",
            max_results=1)
        if not runs:
            return None
        run_id = runs[0].info.run_id
        self.logged_steps[key] = {m.step for metric in STEP_MARKERS
                                  for m in self.client.get_metric_history(run_id, metric)}
        return run_id

    def steps(self, key: str, marker: str | None = None) -> set[int]:
        """The steps the run of `key` holds: of its epochs or trials finished, or (marker LOOKS_MARKER) of its
        looks at the test segment, a sequence of their own."""
        run_id = self.run_id(key)
        if marker is None:
            return self.logged_steps[key]
        if key not in self.look_steps:
            self.look_steps[key] = {m.step for m in self.client.get_metric_history(run_id, marker)}
        return self.look_steps[key]

    def running(self) -> list[Any]:
        """The sweep's runs the store holds as RUNNING."""
        return self.client.search_runs(
            [self.experiment_id], f"tags.`{SWEEP_TAG}` = '{self.sweep_id}' and attributes.status = 'RUNNING'",
            max_results=1000)


@dataclass(frozen=True)
class StartRun:
    """Find the run of `key` (reopened as RUNNING, missing params added) or create it under `parent`'s run."""

    kind: ClassVar[str] = "start_run"
    key: str
    name: str
    parent: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)

    def apply(self, runs: SweepRuns) -> None:
        client, found = runs.client, runs.find(self.key)
        if found is not None:
            runs.run_ids[self.key] = found
            client.update_run(found, status="RUNNING")
            have = client.get_run(found).data.params  # a retried start may have created it without them
            missing = [Param(k, v) for k, v in self.params.items() if k not in have]
            if missing:
                client.log_batch(found, params=missing, synchronous=True)
            return
        tags = {**self.tags, KEY_TAG: self.key, SWEEP_TAG: runs.sweep_id}
        if self.parent is not None:
            tags["mlflow.parentRunId"] = runs.run_id(self.parent)
        run = client.create_run(runs.experiment_id, tags=tags, run_name=self.name)
        if self.params:
            client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in self.params.items()], synchronous=True)
        runs.run_ids[self.key], runs.logged_steps[self.key] = run.info.run_id, set()


@dataclass(frozen=True)
class LogMetrics:
    """Metrics at `step` (an epoch); a step the run already holds is not logged again (a look at the test segment,
    with LOOKS_MARKER among its values: a step of the looks)."""

    kind: ClassVar[str] = "metrics"
    key: str
    step: int
    values: dict[str, float]
    timestamp: int  # ms since the epoch

    def apply(self, runs: SweepRuns) -> None:
        run_id = runs.run_id(self.key)
        held = runs.steps(self.key, LOOKS_MARKER if LOOKS_MARKER in self.values else None)
        if self.step in held:
            return
        metrics = [Metric(k, v, self.timestamp, self.step) for k, v in self.values.items()]
        runs.client.log_batch(run_id, metrics=metrics, synchronous=True)
        held.add(self.step)


@dataclass(frozen=True)
class SetTags:
    kind: ClassVar[str] = "tags"
    key: str
    tags: dict[str, str]

    def apply(self, runs: SweepRuns) -> None:
        runs.client.log_batch(runs.run_id(self.key), tags=[RunTag(k, v) for k, v in self.tags.items()],
                              synchronous=True)


@dataclass(frozen=True)
class LogArtifact:
    """Upload the file `path` into the run's artifacts (under `folder`); delete it once sent if `remove`."""

    kind: ClassVar[str] = "artifact"
    key: str
    path: str
    folder: str | None = None
    remove: bool = False

    def apply(self, runs: SweepRuns) -> None:
        run_id, path = runs.run_id(self.key), Path(self.path)
        if path.exists():  # sent, then replayed from the spool: the file is already gone
            runs.client.log_artifact(run_id, str(path), self.folder)
            if self.remove:
                path.unlink()


@dataclass(frozen=True)
class LogInput:
    """The bars the run trained on, as a dataset input (tuning/tracking/lineage.py); logged once however often
    it is applied (MLflow keeps one input per dataset and run)."""

    kind: ClassVar[str] = "input"
    key: str
    name: str
    digest: str
    source: str
    profile: str
    context: str

    def apply(self, runs: SweepRuns) -> None:
        bars = BarsInput(self.name, self.digest, self.source, self.profile)
        runs.client.log_inputs(runs.run_id(self.key), [dataset_input(bars, self.context)])


@dataclass(frozen=True)
class EndRun:
    kind: ClassVar[str] = "end_run"
    key: str
    status: str  # FINISHED, FAILED or KILLED

    def apply(self, runs: SweepRuns) -> None:
        runs.client.set_terminated(runs.run_id(self.key), self.status)


@dataclass(frozen=True)
class EndLostRuns:
    """End, KILLED with stop_reason `lost`, the sweep's RUNNING runs whose key is not in `known`: runs a driver
    killed outright opened for trials Ray Tune had not saved yet, which will never end."""

    kind: ClassVar[str] = "end_lost"
    known: tuple[str, ...]
    key: str = SWEEP_KEY

    def apply(self, runs: SweepRuns) -> None:
        for run in runs.running():
            if run.data.tags.get(KEY_TAG) not in {*self.known, SWEEP_KEY}:
                runs.client.set_tag(run.info.run_id, "stop_reason", "lost")
                runs.client.set_terminated(run.info.run_id, "KILLED")


Operation = StartRun | LogMetrics | SetTags | LogArtifact | LogInput | EndRun | EndLostRuns
_KINDS: dict[str, type] = {op.kind: op for op in (StartRun, LogMetrics, SetTags, LogArtifact, LogInput, EndRun,
                                                  EndLostRuns)}


def to_json(op: Operation) -> dict[str, Any]:
    """The operation as the spool keeps it: its fields and "op", its kind."""
    values = asdict(op)
    if isinstance(op, EndLostRuns):
        values["known"] = list(op.known)
    return {"op": op.kind, **values}


def operation_from_json(values: dict[str, Any]) -> Operation:
    """The operation a spool line holds; KeyError/TypeError for a line that is not one."""
    fields = {k: v for k, v in values.items() if k != "op"}
    kind = _KINDS[values["op"]]
    if kind is EndLostRuns:
        fields["known"] = tuple(fields["known"])
    return kind(**fields)
