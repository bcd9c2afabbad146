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
             f"persistence {best.baseline_persistence:.4f}); every loss is the objective {space.run.data.loss}'s."]
    if unconfirmed:
        s = confirmed[0]
        scored = f"mean best val_loss {s.mean:.4f}" if s.n else "none scored yet"
        notes.insert(0, f"UNCONFIRMED: chosen by `best --unconfirmed` with {s.n} of its {s.planned} confirmation "
                     f"runs scored ({scored}); the sweep's confirmation is incomplete.")
    elif confirmed:
        s = confirmed[0]
        spread = f" +- {s.std:.4f}" if s.n > 1 else ""  # one run has no spread to show
        notes.append(f"Confirmed over seeds and folds: mean best val_loss {s.mean:.4f}{spread} (n={s.n}) over "
                     f"its fresh runs; its search trial's {s.search_loss:.4f} is the minimum that made it a finalist.")
    notes.append(f"Train it under the schedule it was tuned with ({config.train.epochs} epochs' warmup and cosine), "
                 f"stopped at its best epoch, {best.best_epoch}. Its seed, device, threads and precision are the "
                 "trial's: the same machine gives its curve.")
    notes.append("Or refit it (`train --refit`): the training and validation segments together, under the same "
                 "schedule and stop, no validation to choose by. On these bars the test segment is the sweep's: "
                 "`--look` scores it, as a look the sweep counts.")
    config.write_yaml(out, command, tuple(notes))
    return config


def train_command(data_path: str, config_path: Path) -> str:
    return f"mamba-tune train --data {shlex.quote(data_path)} --config {shlex.quote(str(config_path))}"
