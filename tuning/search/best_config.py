"""A sweep's winner as a run configuration that `mamba-tune train --config` reads."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from tuning.search.finalists import finalist_scores
from tuning.search.ledger import TrialRecord
from tuning.search.recipe import TrainingRecipe, Tuned
from tuning.search.space import SweepSpace, with_params


def write_best_config(space: SweepSpace, best: TrialRecord, sweep_name: str, data_path: str,
                      out: Path, records: list[TrialRecord] | None = None,
                      data_sha256: str | None = None) -> TrainingRecipe:
    """Write the trial's whole configuration (epochs: the schedule it was tuned with; its seed, device, threads
    and precision: so it reproduces) to `out`, with its figures and, from `records`, its confirmed score (a
    finalist with confirmation runs missing, handed over by `best --unconfirmed`, is said to be UNCONFIRMED)."""
    confirmed = [s for s in finalist_scores(records or [], space.confirm, space.run.train.seed)
                 if s.record.trial_id == best.trial_id] if space.confirm is not None else []
    unconfirmed = bool(confirmed) and not confirmed[0].complete
    config = dataclasses.replace(with_params(space.run, best.params), tuned=Tuned(
        sweep_name, best.trial_id, best.best_epoch, best.best_val_loss, data_sha256=data_sha256,
        unconfirmed=unconfirmed))
    command = train_command(data_path, out)
    notes = [f"The winner of sweep {sweep_name}: trial {best.trial_id}, val_loss {best.best_val_loss:.4f} at epoch "
             f"{best.best_epoch} of {best.stop_epoch} (E0 {best.e0_val_loss:.4f}, HAR {best.baseline_har:.4f}, "
             f"persistence {best.baseline_persistence:.4f})."]
    if unconfirmed:
        s = confirmed[0]
        notes.insert(0, f"UNCONFIRMED: chosen by `best --unconfirmed` with {s.n} of its {s.planned} runs scored "
                     f"(mean best val_loss {s.mean:.4f}); the sweep's confirmation is incomplete.")
    elif confirmed and confirmed[0].n > 1:
        s = confirmed[0]
        notes.append(f"Confirmed over seeds and folds: mean best val_loss {s.mean:.4f} +- {s.std:.4f} (n={s.n}).")
    notes.append(f"Train all {config.train.epochs} epochs (the schedule it was tuned with); best.pt keeps the best "
                 "epoch. Its seed, device, threads and precision are the trial's: the same machine gives its curve.")
    notes.append(f"Or refit it (`train --refit`): the training and validation segments together for its best epoch "
                 f"count, {best.best_epoch}, no validation to choose by.")
    config.write_yaml(out, command, tuple(notes))
    return config


def train_command(data_path: str, config_path: Path) -> str:
    return f"mamba-tune train --data {shlex.quote(data_path)} --config {shlex.quote(str(config_path))}"
