"""`mamba-tune list`: the sweeps in a storage folder, read from their files alone (no Ray, no MLflow).

A sweep's state: running (a live driver, tuning/sweep/driver_mark.py), finished (every search
trial and confirmation run recorded, and the winner's look at the test segment taken) or interrupted
(neither: `resume` continues it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tuning.search.finalists import SEARCH, pending_runs, winner_or_none
from tuning.search.ledger import Ledger
from tuning.search.space import parse_space
from tuning.sweep.driver_mark import running_driver
from tuning.sweep.manifest import SweepManifest
from tuning.sweep_files import LEDGER, MANIFEST, latest_look

RUNNING, FINISHED, INTERRUPTED = "running", "finished", "interrupted"


@dataclass(frozen=True)
class SweepSummary:
    name: str
    state: str  # RUNNING, FINISHED or INTERRUPTED
    driver: str | None  # "pid N" while running
    finished: int  # search trials in the ledger
    trials: int  # asked for
    best_val_loss: float  # the confirmed winner's (nan before there is one)
    test_loss: float  # the winner's one look at the test segment (nan before it)
    started: str  # ISO time, UTC
    objective: str = "mse_log"  # what its losses are in (data.objective resolved; a sweep before objectives: mse_log)


def summarise(folder: Path) -> SweepSummary:
    """The sweep in `folder` (which holds its sweep.json) as `list` shows it."""
    manifest = SweepManifest.from_dict(json.loads((folder / MANIFEST).read_text()))
    space = parse_space(manifest.space, str(folder / MANIFEST), stored=True)
    records = list(Ledger(folder / LEDGER).records.values())
    searched = sum(r.stage == SEARCH for r in records)
    pending = pending_runs(records, space.confirm, space.run.train.seed) if space.confirm is not None else []
    best = winner_or_none(records, space.confirm, space.run.train.seed)  # None until its confirmation is complete
    look = latest_look(folder, best.trial_id) if best is not None else None
    # `resume` takes a missing look (look_due, without loading the bars: a test segment exists at test_fraction > 0)
    look_missing = best is not None and space.run.data.test_fraction > 0 and look is None
    driver = running_driver(folder)
    done = searched >= manifest.trials and not pending and not look_missing
    state = RUNNING if driver else FINISHED if done else INTERRUPTED
    test_loss = look["test_loss"] if look is not None else math.nan
    return SweepSummary(manifest.name, state, driver, searched, manifest.trials,
                        best.best_val_loss if best is not None else math.nan, test_loss, manifest.created,
                        space.run.data.loss)
