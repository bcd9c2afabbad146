"""SweepCallback: one trial's life (start, epochs, end) into the ledger and its MLflow run, with no Ray running."""

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import pyarrow.fs
import pytest
from mlflow import MlflowClient

from tests.tuning.sweeps import SPACE
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.space import parse_space
from tuning.sweep.trial_files import HISTORY, save_best_snapshot
from tuning.sweep.trial_lifecycle import ACTIVE, SweepCallback, active_key
from tuning.tracking.log import TrackingLog
from tuning.tracking.runs import open_sweep
from tuning.tracking.store import resolve_store

SPACE_PARSED = parse_space(SPACE, "space")
VAL = [1.0, 0.5, 0.8]  # a trial's val loss by epoch: best at 1, through the gate at 2 (0.8 < 0.9 x E0)


@pytest.fixture()
def sweep(tmp_path):
    """A sweep folder, its live tracking in an SQLite store and its SweepCallback; -> (callback, client, folder)."""
    folder = tmp_path / "sweeps" / "t"
    folder.mkdir(parents=True)
    store = resolve_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = MlflowClient(store.uri)
    log = TrackingLog(client, store.experiment_id(client, "t"), "sweep-1", folder / "tracking-pending.jsonl")
    tracking = open_sweep(log, folder / "tracking", "t", SPACE, SPACE_PARSED, "bars.parquet", {"n_bars": 10},
                          {"persistence": 1.0}, {"trials": 1})
    ACTIVE[active_key(folder / "trials.json")] = tracking
    try:
        yield SweepCallback(folder / "trials.json", SPACE_PARSED, str(tmp_path / "sweeps")), client, folder
    finally:
        ACTIVE.pop(active_key(folder / "trials.json"), None)
        log.close(30)


def trial_checkpoint(folder: Path, stamp: str, last_epoch: int) -> str:
    """A checkpoint folder with the history of epochs 0..last_epoch and its best.pt (epoch 1's)."""
    path = folder / "train" / "a" / f"checkpoint_2026-12-01_08-00-{stamp}"
    path.mkdir(parents=True)
    history = [{k: v for k, v in result(e, "").items() if k != "checkpoint_path"} for e in range(last_epoch + 1)]
    (path / HISTORY).write_text(json.dumps(history))
    (path / "best.pt").write_bytes(b"best at epoch 1")
    return str(path)


def result(epoch: int, checkpoint: str) -> dict:
    return {"epoch": epoch, "train_loss": 1.0, "val_loss": VAL[epoch], "best_epoch": min(epoch, 1),
            "best_val_loss": 1.0 if epoch == 0 else 0.5, "e0_val_loss": 1.0, "baseline_persistence": 1.0,
            "epoch_s": 0.1, "checkpoint_path": checkpoint}


def trial_run(client: MlflowClient, trial_id: str):
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id], f"tags.trial_id = '{trial_id}'")
    assert len(runs) == 1
    return runs[0]


def test_a_trial_end_is_recorded_then_logged_with_the_best_pt_of_its_record(sweep, tmp_path):
    callback, client, folder = sweep
    trial = SimpleNamespace(trial_id="a", config={"learning_rate": 1e-3, "weight_decay": 1e-2, "batch_size": 64},
                            status="RUNNING", last_result=None)
    callback.on_trial_start(0, [trial], trial)
    (tmp_path / "best.pt").write_bytes(b"best at epoch 1")
    save_best_snapshot(pyarrow.fs.LocalFileSystem(), tmp_path / "best.pt", str(folder / "train"), "a", 1)
    for epoch in (0, 1, 2):
        trial.last_result = result(epoch, trial_checkpoint(folder, f"0{epoch}", epoch))
        callback.on_trial_result(0, [trial], trial, trial.last_result)
    trial.status = "TERMINATED"
    callback.on_trial_complete(0, [trial], trial)
    ACTIVE[active_key(folder / "trials.json")].log.flush(30)

    record = Ledger(folder / "trials.json").records["a"]
    assert (record.stop_reason, record.stop_epoch, record.best_epoch, record.val_curve) == ("asha", 2, 1, tuple(VAL))
    run = trial_run(client, "a")
    assert (run.data.tags["stop_reason"], run.data.tags["stop_epoch"], run.info.status) == ("asha", "2", "FINISHED")
    assert [m.step for m in client.get_metric_history(run.info.run_id, "val_loss_mse_log")] == [0, 1, 2]
    best = client.download_artifacts(run.info.run_id, "checkpoint/best.pt", str(tmp_path))
    assert Path(best).read_bytes() == b"best at epoch 1"
    assert not (folder / "train" / "a" / "best").exists() and not (folder / "tracking" / "a" / "best.pt").exists()


def test_a_trial_a_killed_driver_recorded_ends_again_in_mlflow_without_a_second_record(sweep):
    callback, client, folder = sweep
    record = TrialRecord(trial_id="b", params={"learning_rate": 1e-3}, stop_reason="completed", stop_epoch=2,
                         best_val_loss=0.5, best_epoch=1, e0_val_loss=1.0, baseline_persistence=1.0, train_s=1.0)
    Ledger(folder / "trials.json").add(record)
    trial = SimpleNamespace(trial_id="b", config={"learning_rate": 1e-3}, status="TERMINATED",
                            last_result=record.final_result())
    callback.on_trial_start(0, [trial], trial)  # resumed: TrialSetup.finished reports its recorded end at once
    callback.on_trial_result(0, [trial], trial, trial.last_result)
    callback.on_trial_complete(0, [trial], trial)
    ACTIVE[active_key(folder / "trials.json")].log.flush(30)

    assert list(Ledger(folder / "trials.json").records) == ["b"]
    run = trial_run(client, "b")
    assert (run.data.tags["stop_reason"], run.info.status) == ("completed", "FINISHED")
    assert not client.get_metric_history(run.info.run_id, "val_loss_mse_log")  # not logged from the report




def test_the_callback_pickles_without_its_open_filesystem_and_reopens_it_when_restored(tmp_path):
    callback = SweepCallback(tmp_path / "trials.json", SPACE_PARSED, str(tmp_path / "sweeps"))
    assert isinstance(callback.fs, pyarrow.fs.LocalFileSystem)  # opened once, then cached
    restored = pickle.loads(pickle.dumps(callback))  # as Ray Tune saves the sweep and `resume` loads it
    assert "fs" not in restored.__dict__ and restored.storage == callback.storage
    assert isinstance(restored.fs, pyarrow.fs.LocalFileSystem)
