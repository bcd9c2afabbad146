"""What the API's commands return: frozen records of what each command wrote, read back from its files (and, for
MLflow's ids, from the tracking store), never from its printed lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Verdict:
    """The winner against a reference on the test segment: the two losses (the sweep's objective, scaled units) and
    the Diebold-Mariano test of their per-sample losses, as `sweep` and `best` print it."""

    reference: str  # "HAR"
    loss: float  # the winner's test loss
    reference_loss: float
    ratio: float  # loss / reference_loss
    dm_stat: float  # < 0: the winner's losses are the smaller
    dm_pvalue: float  # two-sided; NaN where the test could not be made
    outcome: str  # "better" | "worse" | "not distinguishable" (at p < 0.05)
    text: str  # the line the CLI prints


@dataclass(frozen=True)
class RegisteredModel:
    """A version in the MLflow Model Registry, as a command left it."""

    name: str
    version: str
    alias: str | None
    run_id: str
    tracking_uri: str


@dataclass(frozen=True)
class SweepResult:
    """A sweep as its files hold it: `sweep`'s and `resume`'s result (and NoWinner's `result`)."""

    name: str
    storage: str  # --storage: a folder or a URI
    folder: Path  # the sweep's records: sweep.json, trials.json, test.json, optuna.db, ray.log
    leaderboard: pd.DataFrame  # the search trials, ranked as the CLI's leaderboard (see docs/python-api.md)
    trials: pd.DataFrame  # every run the ledger holds (search trials and confirmation runs), in the order they ended
    winner_trial: str | None  # the confirmed winner's trial id; None when there is none (yet)
    winner: dict[str, Any] | None  # its configuration as `best` exports it (best.yaml's data, model, train, tuned)
    test: dict[str, Any] | None  # the winner's look at the test segment (test.json), None before it
    verdict: Verdict | None  # the look's verdict against HAR
    mlflow_run_id: str | None  # the sweep's parent run; None when the store holds none (yet) or does not answer
    tracking_uri: str  # the MLflow store the sweep logs to
    study_url: str  # the Optuna study
    objective: str | None  # the loss every trial is ranked by (data.objective), where the sweep's data say it


@dataclass(frozen=True)
class BestResult:
    """`best`: the winner's configuration file, and the version it registered (with `register=`)."""

    name: str
    config_path: Path  # the YAML `train(config=...)` takes
    config: dict[str, Any]  # its content
    trial_id: str
    best_val_loss: float
    verdict: Verdict | None  # the sweep's look at its test segment with this trial; None before it
    registered: RegisteredModel | None


@dataclass(frozen=True)
class TrainResult:
    """`train`: the run's folder and what is in it."""

    out: Path
    config: dict[str, Any]  # config.yaml
    history: pd.DataFrame  # metrics.json: a row per epoch (epoch 0: before training)
    best_epoch: int
    best_val_loss: float
    best_checkpoint: Path  # best.pt
    last_checkpoint: Path  # last.pt
    test: dict[str, Any] | None  # test.json: the test segment scored once, when it was
    registered: RegisteredModel | None


@dataclass(frozen=True)
class PromoteResult:
    """`promote`: the comparison run it recorded, and where @champion is now."""

    model: str
    promoted: bool  # whether @champion moved to the challenger
    challenger_version: str
    champion_version: str | None  # before the comparison; None when there was none
    metrics: dict[str, float]  # the run's metrics: each contender's loss, n_scored, dm_stat_*/dm_pvalue_*
    verdict: str  # the verdict in words (the run's note)
    run_id: str
    tracking_uri: str


@dataclass(frozen=True)
class BarsResult:
    """`import_bars` and `synth_bars`: the Parquet file written."""

    path: Path
    rows: int
    provenance: dict[str, Any] | None  # an import's record of its source (source, SHA-256, mapping, zone); None else
