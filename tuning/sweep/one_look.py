"""The sweep's one look at the test segment: once the winner is chosen, its best.pt is scored there, once,
and, when it was confirmed on other seeds, its seed ensemble too (the mean forecast of its runs on the
validation segment; `best --register --ensemble` ships that).

Nothing before it reads the test segment: not a trial, not the scheduler, not the choice of the
winner. The scores are kept in <sweep folder>/test.json with the trial they belong to; a resumed
sweep whose winner is the same reads them back instead of looking again.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from model.atomic import write_text_atomic
from model.data import Dataset
from model.holdout import score_ensemble, score_on_test_segment
from tuning.search.ledger import TrialRecord
from tuning.sweep.trial_files import copy_file, final_checkpoint, stage_record_best, storage_filesystem
from tuning.sweep_files import TEST_LOOK, read_test_look


def look_at_test_segment(folder: Path, ray_storage: str, train_storage: str, winner: TrialRecord,
                         data: Dataset, members: list[TrialRecord] | None = None) -> dict[str, Any] | None:
    """{trial_id, best_epoch, test_loss, baseline_har, baseline_persistence, baseline_mean, n_test} of the
    winner, and with two or more seed `members` (the winner first) "ensemble": {trials, val_loss, test_loss,
    member_test_losses, n_members}; from test.json when it already holds them; None when the data have no
    test segment or the winner's checkpoint is gone."""
    if not len(data.test_index):
        return None
    kept = read_test_look(folder)
    if kept is not None and kept["trial_id"] == winner.trial_id:
        return kept
    fs = storage_filesystem(ray_storage)
    checkpoint, _ = final_checkpoint(fs, None, train_storage, winner.trial_id, winner.stop_epoch)
    with tempfile.TemporaryDirectory(prefix="mamba-tune-test-") as tmp:
        best = copy_file(fs, checkpoint, "best.pt", Path(tmp) / "best.pt")
        if best is None:
            return None
        scores = {"trial_id": winner.trial_id, "best_epoch": winner.best_epoch, **score_on_test_segment(best, data)}
        if members is not None and len(members) > 1:
            staged = [best, *(stage_record_best(fs, train_storage, m, Path(tmp) / f"member-{i}.pt")
                              for i, m in enumerate(members[1:], 1))]
            if all(path is not None for path in staged):
                scores["ensemble"] = {"trials": [m.trial_id for m in members], **score_ensemble(staged, data)}
    write_text_atomic(folder / TEST_LOOK, json.dumps(scores, indent=1))
    return scores
