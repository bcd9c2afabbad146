"""A sweep whose Optuna study was SQLite on its head is refused by `resume` on a head that lacks that file, in one
line, before Ray starts: Ray Tune's saved searcher would report to trials no study holds, and the resumed sweep
would crash after its first epoch ('Record does not exist'). The records come back from the storage's copy (a
file:// URI stands for the bucket) into another machine's folder, or into this very folder on a new volume at the
same path: a Kubernetes head pod replaced with its volume lost, whose folders.json names no earlier folder. The
study held trials once the ledger has a finished one (copied at each trial's end) or Ray Tune saved its state (now
and then), whichever came first; with neither, nothing is lost and the sweep starts its study anew."""

from __future__ import annotations

import json

import pytest

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import space_values
from tuning.search.ledger import Ledger, TrialRecord
from tuning.sweep.manifest import SweepManifest
from tuning.sweep_files import LEDGER, MANIFEST, TUNE_DIR

pytestmark = pytest.mark.faults  # a head lost with its volume
FINISHED = TrialRecord(trial_id="t_00000", params={"learning_rate": 1e-3}, stop_reason="completed", stop_epoch=3,
                       best_val_loss=0.5, best_epoch=2, e0_val_loss=0.9, baseline_persistence=1.0, train_s=1.0)


@pytest.mark.parametrize(("moved", "saved"), [(False, "tune-state"), (True, "ledger")],
                         ids=["same-folder-new-volume", "another-machine"])  # each case a CLI run: a few seconds
def test_resume_refuses_a_sweep_whose_sqlite_study_stayed_on_the_lost_head(moved, saved, tmp_path):
    bucket, head = tmp_path / "bucket" / "sweeps", tmp_path / "head"
    storage = f"file://{bucket}"
    folder = head / "runs" / "sweeps" / "t"  # where `resume` in `head` keeps sweep t of a URI storage
    ran_in = tmp_path / "lost-head" / "runs" / "sweeps" / "t" if moved else folder
    manifest = SweepManifest.new("t", tmp_path / "bars.parquet", space_values(trials=2), 2, storage, None,
                                 {"residual_to": "none", "leverage_lookbacks": []}, None)
    copy = bucket / "t"
    copy.mkdir(parents=True)
    (copy / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    (copy / "folders.json").write_text(json.dumps([str(ran_in)]))
    if saved == "tune-state":  # Ray Tune saved the sweep, its searcher with it
        (copy / TUNE_DIR).mkdir()
        (copy / TUNE_DIR / "experiment_state.json").write_text("{}")
    else:  # a trial ended and its record was copied before Tune saved anything
        Ledger(copy / LEDGER).add(FINISHED)
    head.mkdir()

    done = run_cli("resume", "t", "--storage", storage, cwd=head)
    assert_one_line_error(done, f"sweep 't''s Optuna study is SQLite in {ran_in / 'optuna.db'}, on the machine (or "
                                f"the volume) that ran it last, and not here; resume it there (or put that file back at "
                                f"{folder / 'optuna.db'}), and give sweeps that must outlive their head --study-url "
                                "postgresql://HOST/DB")
    assert not (folder / "optuna.db").exists()  # no empty study made in its place
