"""A sweep's best trial as a run configuration that `mamba-tune train --config` reads."""

from __future__ import annotations

import shlex
from pathlib import Path

from tuning.search.ledger import TrialRecord
from tuning.search.recipe import TrainingRecipe
from tuning.search.space import SweepSpace, with_params


def write_best_config(space: SweepSpace, best: TrialRecord, sweep_name: str, data_path: str,
                      out: Path) -> TrainingRecipe:
    """Write the trial's whole configuration (epochs: the schedule it was tuned with) to `out`, with its figures."""
    config = with_params(space.run, best.params)
    command = train_command(data_path, out)
    notes = (f"The best trial of sweep {sweep_name}: {best.trial_id}, val_loss {best.best_val_loss:.4f} at epoch "
             f"{best.best_epoch} of {best.stop_epoch} (E0 {best.e0_val_loss:.4f}, persistence "
             f"{best.baseline_persistence:.4f}).",
             f"Train all {config.train.epochs} epochs (the schedule it was tuned with); best.pt keeps the best epoch.")
    config.write_yaml(out, command, notes)
    return config


def train_command(data_path: str, config_path: Path) -> str:
    return f"mamba-tune train --data {shlex.quote(data_path)} --config {shlex.quote(str(config_path))}"
