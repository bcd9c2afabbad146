"""final_checkpoint: the checkpoint a trial ended on, even when Ray Train has replaced the one its result named."""

import json
import pickle
import shutil
from pathlib import Path

import pyarrow.fs

from tuning.sweep.trial_files import HISTORY, final_checkpoint

FS = pyarrow.fs.LocalFileSystem()


def checkpoint(train, trial_id: str, stamp: str, last_epoch: int) -> str:
    folder = train / trial_id / f"checkpoint_2026-11-30_08-00-{stamp}"
    folder.mkdir(parents=True)
    (folder / HISTORY).write_text(json.dumps([{"epoch": e, "val_loss": 1.0 / (e + 1)} for e in range(last_epoch + 1)]))
    return str(folder)


def test_the_named_checkpoint_is_taken_while_it_exists(tmp_path):
    older, newer = checkpoint(tmp_path, "a", "01", 2), checkpoint(tmp_path, "a", "02", 3)
    path, history = final_checkpoint(FS, older, str(tmp_path), "a", stop_epoch=2)
    assert path == older and [m["epoch"] for m in history] == [0, 1, 2]
    assert final_checkpoint(FS, newer, str(tmp_path), "a", stop_epoch=3)[0] == newer


def test_a_named_checkpoint_train_replaced_falls_back_to_the_newest_kept_up_to_the_stop_epoch(tmp_path):
    stopped_on = checkpoint(tmp_path, "a", "01", 3)
    kept = [checkpoint(tmp_path, "a", "02", 4), checkpoint(tmp_path, "a", "03", 5)]  # ran on after the stop
    path, history = final_checkpoint(FS, stopped_on + "-gone", str(tmp_path), "a", stop_epoch=3)
    assert path == stopped_on and [m["epoch"] for m in history] == [0, 1, 2, 3]
    shutil.rmtree(stopped_on)  # only later ones left: the oldest, cut to the stop epoch
    path, history = final_checkpoint(FS, stopped_on, str(tmp_path), "a", stop_epoch=3)
    assert path == kept[0] and [m["epoch"] for m in history] == [0, 1, 2, 3]


def test_a_resumed_trial_that_names_no_checkpoint_takes_the_newest(tmp_path):
    checkpoint(tmp_path, "a", "01", 1)
    newest = checkpoint(tmp_path, "a", "02", 2)
    assert final_checkpoint(FS, None, str(tmp_path), "a", stop_epoch=2) == (
        newest, [{"epoch": e, "val_loss": 1.0 / (e + 1)} for e in range(3)])


def test_no_checkpoint_left_gives_none(tmp_path):
    assert final_checkpoint(FS, None, str(tmp_path), "missing", stop_epoch=3) == (None, [])
    assert final_checkpoint(FS, str(tmp_path / "gone"), str(tmp_path), "missing", stop_epoch=3) == (None, [])


def test_the_ledger_stages_the_best_pt_of_the_checkpoint_the_trial_stopped_on_before_its_record(tmp_path):
    """Tracking uploads this copy: a resumed driver never takes best.pt from a checkpoint written after the stop."""
    from types import SimpleNamespace

    from tests.tuning.sweeps import SPACE
    from tuning.search.ledger import Ledger
    from tuning.search.space import parse_space
    from tuning.sweep.trial_files import staged_best
    from tuning.sweep.trial_lifecycle import SweepCallback

    folder = tmp_path / "sweeps" / "t"
    train = folder / "train"
    stopped_on, after = checkpoint(train, "a", "01", 2), checkpoint(train, "a", "02", 3)  # it ran one epoch on
    (Path(stopped_on) / "best.pt").write_bytes(b"best at epoch 2")
    (Path(after) / "best.pt").write_bytes(b"best at epoch 3")
    callback = SweepCallback(folder / "trials.json", parse_space(SPACE, "space"), str(tmp_path / "sweeps"))
    last = {"epoch": 2, "val_loss": 1 / 3, "best_val_loss": 1 / 3, "best_epoch": 2, "e0_val_loss": 1.0,
            "baseline_persistence": 1.0, "checkpoint_path": stopped_on}
    trial = SimpleNamespace(trial_id="a", config={"learning_rate": 1e-3}, last_result=last, status="TERMINATED")
    callback.on_trial_complete(0, [trial], trial)
    record = Ledger(folder / "trials.json").records["a"]
    assert (record.stop_reason, record.stop_epoch, record.best_epoch) == ("asha", 2, 2)
    assert staged_best(folder / "tracking", "a").read_bytes() == b"best at epoch 2"


def test_the_ledger_stages_its_best_epochs_snapshot_when_train_deleted_the_checkpoint_the_trial_stopped_on(tmp_path):
    """Stopped at epoch 2 (best 2), the trial ran on, improved at 3 and 4; Ray Train kept only those two."""
    from types import SimpleNamespace

    from tests.tuning.sweeps import SPACE
    from tuning.search.ledger import Ledger
    from tuning.search.space import parse_space
    from tuning.sweep.trial_files import best_snapshot, save_best_snapshot, staged_best
    from tuning.sweep.trial_lifecycle import SweepCallback

    folder = tmp_path / "sweeps" / "t"
    train = folder / "train"
    for epoch in (1, 2, 3, 4):  # what the trial's rank-0 worker writes on each improvement
        (tmp_path / "best.pt").write_bytes(f"best at epoch {epoch}".encode())
        save_best_snapshot(FS, tmp_path / "best.pt", str(train), "a", epoch)
    for stamp, epoch in (("03", 3), ("04", 4)):
        (Path(checkpoint(train, "a", stamp, epoch)) / "best.pt").write_bytes(f"best at epoch {epoch}".encode())
    callback = SweepCallback(folder / "trials.json", parse_space(SPACE, "space"), str(tmp_path / "sweeps"))
    trial = SimpleNamespace(trial_id="a", config={"learning_rate": 1e-3}, status="TERMINATED", last_result=None)
    for epoch in (1, 2):
        trial.last_result = {"epoch": epoch, "val_loss": 1 / (epoch + 1), "best_val_loss": 1 / (epoch + 1),
                             "best_epoch": epoch, "e0_val_loss": 1.0, "baseline_persistence": 1.0,
                             "checkpoint_path": str(train / "a" / f"checkpoint_gone_{epoch}")}
        callback.on_trial_result(0, [trial], trial, trial.last_result)
    assert not Path(best_snapshot(str(train), "a", 1)).exists()  # bettered by a result the driver has taken
    assert Path(best_snapshot(str(train), "a", 3)).exists()  # not heard of yet: kept
    callback.on_trial_complete(0, [trial], trial)
    record = Ledger(folder / "trials.json").records["a"]
    assert (record.stop_reason, record.stop_epoch, record.best_epoch) == ("asha", 2, 2)
    assert staged_best(folder / "tracking", "a").read_bytes() == b"best at epoch 2"
    assert not (train / "a" / "best").exists()  # staged: the snapshots are gone


def test_a_sweep_from_before_snapshots_stages_the_best_pt_of_its_checkpoint(tmp_path):
    from tuning.sweep.trial_files import stage_best

    stopped_on = checkpoint(tmp_path, "a", "01", 2)
    (Path(stopped_on) / "best.pt").write_bytes(b"best at epoch 2")
    assert stage_best(FS, str(tmp_path), "a", 2, stopped_on, tmp_path / "staged.pt").read_bytes() == b"best at epoch 2"
    assert stage_best(FS, str(tmp_path), "a", 2, None, tmp_path / "none.pt") is None
    assert not (tmp_path / "none.pt").exists()


def test_sweep_curves_hold_each_recorded_trial_and_each_interrupted_one_as_far_as_it_got(tmp_path):
    from tuning.search.curves import RecordedCurve
    from tuning.search.ledger import Ledger, TrialRecord
    from tuning.sweep.trial_files import SweepCurves

    train = tmp_path / "sweeps" / "t" / "train"
    Ledger(tmp_path / "trials.json").add(TrialRecord(
        trial_id="done", params={}, stop_reason="nan", stop_epoch=3, best_val_loss=0.5, best_epoch=2,
        e0_val_loss=1.0, baseline_persistence=1.0, train_s=1.0, val_curve=(1.0, 0.6, 0.5)))
    checkpoint(train, "done", "01", 5)  # a recorded trial's files: its record speaks for it
    checkpoint(train, "running", "01", 1)
    checkpoint(train, "running", "02", 2)  # interrupted after epoch 2
    (train / "starting").mkdir()  # interrupted before its first checkpoint: nothing to rebuild from
    curves = pickle.loads(pickle.dumps(SweepCurves(tmp_path / "trials.json", str(tmp_path), str(train))))
    assert curves.recorded() == {"done": RecordedCurve((1.0, 0.6, 0.5), 3)}
    assert curves.unrecorded("running") == RecordedCurve((1.0, 0.5, 1.0 / 3), 2)
    assert curves.unrecorded("done") is None and curves.unrecorded("starting") is None
    empty = SweepCurves(tmp_path / "none.json", str(tmp_path), str(tmp_path / "nothing"))
    assert empty.recorded() == {} and empty.unrecorded("running") is None


def test_sweep_curves_hold_only_the_search_trials_validation_curves(tmp_path):
    """Confirmation runs (another seed, another fold) and records of another fold never met the search's rungs; the
    folder of a run the ledger does not hold (an interrupted confirmation run) is no recorded curve either."""
    from tuning.search.curves import RecordedCurve
    from tuning.search.ledger import Ledger, TrialRecord
    from tuning.sweep.trial_files import SweepCurves

    train, ledger = tmp_path / "train", Ledger(tmp_path / "trials.json")
    for trial_id, stage, fold in (("search", "search", 1), ("seed", "confirm", 1), ("fold2", "confirm", 2),
                                  ("search-fold2", "search", 2)):
        ledger.add(TrialRecord(trial_id=trial_id, params={}, stop_reason="asha", stop_epoch=2, best_val_loss=0.5,
                               best_epoch=2, e0_val_loss=1.0, baseline_persistence=1.0, train_s=1.0,
                               val_curve=(1.0, 0.6, 0.5), stage=stage, seed=7 if stage == "confirm" else None,
                               fold=fold, finalist="search" if stage == "confirm" else None))
        checkpoint(train, trial_id, "01", 4)  # each ran on after its stop
    checkpoint(train, "interrupted", "01", 3)  # a confirmation run the sweep was interrupted in
    curves = SweepCurves(tmp_path / "trials.json", str(tmp_path), str(train))
    assert curves.recorded() == {"search": RecordedCurve((1.0, 0.6, 0.5), 2)}
    assert [curves.unrecorded(k) for k in ("search", "seed", "fold2", "search-fold2")] == [None] * 4  # in the ledger
