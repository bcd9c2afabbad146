"""A sweep's result read back from its folder (sweep.json, trials.json, test.json) and its MLflow parent run."""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mamba_tune.results import SweepResult, Verdict
from tuning.cli.figures import SIGNIFICANCE, verdict_line
from tuning.search.finalists import winner_or_none
from tuning.search.ledger import Ledger, TrialRecord, leaderboard
from tuning.search.space import SweepSpace, parse_space
from tuning.sweep.manifest import read_manifest
from tuning.sweep_files import LEDGER, MANIFEST, latest_look, sweep_paths

# The leaderboard's columns, after `rank` (its index) and `trial_id`: the trial's searched settings by their names
# (learning_rate, weight_decay, batch_size, model.d_model...), then these
LEADERBOARD_COLUMNS = ("stop_reason", "stop_epoch", "best_val_loss", "best_epoch", "vs_e0", "vs_har",
                       "vs_persistence")


def read_sweep(storage: str, name: str) -> SweepResult:
    """The sweep `name` in `storage` as its files hold it now."""
    paths = sweep_paths(storage, name)
    manifest = read_manifest(paths)
    space = parse_space(manifest.space, str(paths.folder / MANIFEST), stored=True)
    records = list(Ledger(paths.folder / LEDGER).records.values())
    best = winner_or_none(records, space.confirm, space.run.train.seed)  # the winner `best` would export
    test = latest_look(paths.folder, best.trial_id) if best is not None else None
    return SweepResult(
        name=name, storage=storage, folder=paths.folder, leaderboard=leaderboard_frame(records),
        trials=pd.DataFrame([asdict(r) for r in records]), winner_trial=best.trial_id if best else None,
        winner=winner_config(space, best, name, manifest.data, records, manifest.bars_sha256) if best else None,
        test=test, verdict=har_verdict(test), mlflow_run_id=_parent_run(manifest),
        tracking_uri=manifest.tracking_uri or _default_store_uri(), study_url=manifest.study_url or paths.study_url,
        objective=space.run.data.loss)


def no_winner_answer(storage: str, name: str) -> str | None:
    """The sweep's answer when no trial passed the gate (tuning/search/gate_verdict.py), its two lines as one; None
    when that is not how it ended or it cannot be read."""
    from tuning.search.gate_verdict import gate_verdict

    try:
        paths = sweep_paths(storage, name)
        space = parse_space(read_manifest(paths).space, str(paths.folder / MANIFEST), stored=True)
        verdict = gate_verdict(list(Ledger(paths.folder / LEDGER).records.values()), space.gate,
                               space.scheduler.max_epochs)
    except Exception:  # noqa: BLE001 - the exit code still says what happened
        return None
    return " ".join(verdict.lines()) if verdict is not None else None


def leaderboard_frame(records: list[TrialRecord]) -> pd.DataFrame:
    """The search trials as the CLI's leaderboard ranks them (completed first, by best val_loss), indexed by rank
    (1, 2, ...): trial_id, each searched setting, then LEADERBOARD_COLUMNS; vs_*: best val_loss over the trial's
    loss before training, HAR's and persistence's (NaN where not finite)."""
    rows = []
    for r in leaderboard(records):
        rows.append({"trial_id": r.trial_id, **r.params, "stop_reason": r.stop_reason, "stop_epoch": r.stop_epoch,
                     "best_val_loss": r.best_val_loss, "best_epoch": r.best_epoch,
                     "vs_e0": _ratio(r.best_val_loss, r.e0_val_loss), "vs_har": _ratio(r.best_val_loss, r.baseline_har),
                     "vs_persistence": _ratio(r.best_val_loss, r.baseline_persistence)})
    frame = pd.DataFrame(rows, columns=None if rows else ["trial_id", *LEADERBOARD_COLUMNS])
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


def winner_config(space: SweepSpace, best: TrialRecord, name: str, data: str, records: list[TrialRecord],
                  sha256: str | None) -> dict[str, Any]:
    """The winner's configuration as `best` writes it (tuning/search/best_config.py), read back as a mapping."""
    from tuning.search.best_config import write_best_config

    with tempfile.TemporaryDirectory(prefix="mamba-tune-api-") as folder:
        path = Path(folder) / "best.yaml"
        write_best_config(space, best, name, data, path, records, sha256)
        return yaml.safe_load(path.read_text())


def har_verdict(test: dict[str, Any] | None) -> Verdict | None:
    """The look's verdict against HAR (its vs_har), as the CLI words it; None without a look."""
    if test is None or "vs_har" not in test:
        return None
    loss, versus = float(test["test_loss"]), test["vs_har"]
    reference, pvalue = float(versus["test_loss"]), float(versus["dm_pvalue"])
    significant = math.isfinite(pvalue) and pvalue < SIGNIFICANCE
    outcome = ("better" if loss < reference else "worse") if significant and loss != reference \
        else "not distinguishable"
    return Verdict("HAR", loss, reference, float(versus.get("ratio", _ratio(loss, reference))),
                   float(versus.get("dm_stat", math.nan)), pvalue, outcome, verdict_line(loss, reference, pvalue))


def _ratio(value: float, reference: float) -> float:
    finite = math.isfinite(value) and math.isfinite(reference) and reference != 0
    return value / reference if finite else math.nan


def _parent_run(manifest: Any) -> str | None:
    from tuning.tracking.runs import find_sweep_run
    from tuning.tracking.store import resolve_store

    found = find_sweep_run(resolve_store(manifest.tracking_uri), manifest.name, manifest.sweep_id)
    return found[1] if found else None


def _default_store_uri() -> str:
    from tuning.tracking.store import resolve_store

    return resolve_store(None).uri
