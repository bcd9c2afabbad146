"""`best --register`: the sweep's winner shipped as it was trained, without training it again.

The confirmed winner's own trial (its base seed, fold 1) left a best.pt in Ray Train's storage; it
becomes a new version of a registered model, the same pyfunc `train --register` logs, in a run
whose tags say where it came from: the sweep, the trial, the data (path and digest), its
validation loss and, after the sweep's one look, its test loss (tags named for the objective they are in:
mamba_tune.val_loss_qlike, mamba_tune.test_loss_qlike; tuning/tracking/objective.py). With --ensemble the model is the
winner's seed ensemble: its best.pt and those of its confirmation runs on other seeds (fold 1),
whose mean forecast the pyfunc returns; the tags then give the ensemble's losses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from model.bars_location import bars_location, is_remote
from tuning.errors import UsageError
from tuning.search.ledger import TrialRecord
from tuning.search.recipe import TrainingRecipe
from tuning.sweep.manifest import SweepManifest
from tuning.sweep.trial_files import final_checkpoint, read_history, stage_best, stage_record_best, storage_filesystem
from tuning.sweep_files import latest_look, read_test_looks
from tuning.tracking.objective import title
from tuning.tracking.registry import CONFIRMATION_TAG, JUDGED_TAG, NO_LOOK, Shipment
from tuning.tracking.runs import find_sweep_run
from tuning.tracking.store import resolve_store


def stage_winner(folder: Path, manifest: SweepManifest, winner: TrialRecord, config: TrainingRecipe,
                 config_file: Path, staging: Path, members: Sequence[TrialRecord] = (),
                 unconfirmed: bool = False) -> Shipment:
    """Copy the winner's best.pt and history into `staging`, and the best.pt of each other seed ensemble member
    (`members`: the winner first, seed_members); -> what to register, its tags saying whether the winner was
    confirmed (`unconfirmed`: `best --unconfirmed` took it with confirmation runs missing). A UsageError when a
    trial's checkpoints are gone."""
    if not is_remote(manifest.data) and not Path(manifest.data).is_file():  # an object: `best` has hashed it
        raise UsageError(f"{manifest.data}: the bars sweep {manifest.name!r} ran on are gone, and the model is "
                         "registered with its data's digest and an input example from them; restore the file")
    fs = storage_filesystem(manifest.ray_storage)
    train_storage = f"{manifest.ray_storage.rstrip('/')}/{manifest.name}/train"
    checkpoint, history = final_checkpoint(fs, None, train_storage, winner.trial_id, winner.stop_epoch)
    best = _staged(stage_best(fs, train_storage, winner.trial_id, winner.best_epoch, checkpoint, staging / "best.pt"),
                   winner, train_storage, manifest, config_file)
    others = tuple(_staged(stage_record_best(fs, train_storage, m, staging / f"member-{i}.pt"), m, train_storage,
                           manifest, config_file) for i, m in enumerate(members[1:], 1))
    metrics = staging / "metrics.json"
    metrics.write_text(json.dumps(history or read_history(fs, checkpoint), indent=1))
    objective = config.data.loss  # the sweep's: every trial's (never searched)
    tags = {"mamba_tune.role": "sweep-winner", "mamba_tune.sweep": manifest.name,
            "mamba_tune.sweep_id": manifest.sweep_id, "mamba_tune.trial": winner.trial_id,
            "mamba_tune.data": manifest.data,
            "mamba_tune.best_epoch": str(winner.best_epoch),
            f"mamba_tune.val_loss_{objective}": f"{winner.best_val_loss:.6g}",
            CONFIRMATION_TAG: "unconfirmed" if unconfirmed else "confirmed"}
    if manifest.bars_sha256:
        tags["mamba_tune.data_sha256"] = manifest.bars_sha256
    test = latest_look(folder, winner.trial_id)
    looks = len(read_test_looks(folder))  # none for this winner: `best --register --no-look` (tuning/cli/best.py)
    tags[JUDGED_TAG] = NO_LOOK if test is None else f"look {test.get('look', looks)} of {looks}"
    if test is not None:
        scored = test.get("ensemble") if others else test
        if scored is not None:
            tags[f"mamba_tune.test_loss_{objective}"] = f"{scored['test_loss']:.6g}"
            tags[f"mamba_tune.test_baseline_har_{objective}"] = f"{test['baseline_har']:.6g}"
        if "vs_har" in test and not others:  # the test of the winner alone against HAR
            tags["mamba_tune.test_dm_pvalue_har"] = f"{test['vs_har']['dm_pvalue']:.4g}"
    if others:
        tags["mamba_tune.ensemble"] = " ".join(m.trial_id for m in members)
    return Shipment(config, bars_location(manifest.data), best, (config_file, metrics), json.loads(metrics.read_text()),
                    winner.best_epoch, f"sweep {manifest.name} winner {winner.trial_id}", tags,
                    _description(manifest, winner, len(others) + 1, objective), others)


def _staged(best: Path | None, record: TrialRecord, train_storage: str, manifest: SweepManifest,
            config_file: Path) -> Path:
    """The record's staged best.pt; a UsageError when none was left to stage."""
    if best is None:
        raise UsageError(f"trial {record.trial_id} of sweep {manifest.name!r} has no best.pt left in "
                         f"{train_storage}; train its configuration with `mamba-tune train --config {config_file}` "
                         "and register that with --register")
    return best


def _description(manifest: SweepManifest, winner: TrialRecord, n_members: int = 1, objective: str = "mse_log") -> str:
    """The version's description: the trial it is, and a link to its sweep's MLflow run."""
    store = resolve_store(manifest.tracking_uri)
    found = find_sweep_run(store, manifest.name, manifest.sweep_id)
    where = (f"its sweep's run: [{found[1]}](#/experiments/{found[0]}/runs/{found[1]}) in {store.uri}"
             if found else f"its sweep's run is in the experiment {manifest.name} of {store.uri}")
    ensemble = f", averaged with its runs on {n_members - 1} other seed(s) (a seed ensemble)" if n_members > 1 else ""
    return (f"Trial {winner.trial_id}, the winner of sweep {manifest.name}, as it was trained (best.pt of epoch "
            f"{winner.best_epoch}, validation {title(objective)} {winner.best_val_loss:.4f}){ensemble}; {where}.")
