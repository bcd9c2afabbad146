"""TrackingLog against real MLflow stores: in order, once per epoch, buffered while a server is down."""

from __future__ import annotations

import logging
import time

import pytest
import torch

from tuning.tracking.log import SWEEP_KEY, TrackingLog
from tuning.tracking.store import open_store, resolve_store


def new_log(uri: str, spool, sweep_id: str = "s1") -> TrackingLog:
    store = resolve_store(uri)
    client = open_store(store)
    return TrackingLog(client, store.experiment_id(client, "exp"), sweep_id, spool)


def steps(log: TrackingLog, key: str, metric: str = "val_loss") -> list[tuple[int, float]]:
    run_id = log.runs.run_id(key)
    return sorted((m.step, m.value) for m in log.runs.client.get_metric_history(run_id, metric))


def test_tracking_log_nests_trial_runs_and_logs_an_epoch_once(tmp_path):
    uri, spool = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "pending.jsonl"
    log = new_log(uri, spool)
    log.start_run(SWEEP_KEY, "sweep", params={"trials": 2})
    log.start_run("t1", "trial 1", parent=SWEEP_KEY, params={"learning_rate": 1e-3})
    for epoch in (0, 1, 1, 2):  # epoch 1 reported twice (a restarted worker)
        log.log_epoch("t1", epoch, {"val_loss": 1.0 / (epoch + 1)})
    assert log.close(30) == 0 and not spool.exists()

    again = new_log(uri, spool)  # a resumed sweep: the same runs, the epochs they hold are not logged again
    again.start_run("t1", "trial 1", parent=SWEEP_KEY, params={"learning_rate": 1e-3})
    again.log_epoch("t1", 2, {"val_loss": 99.0})
    again.log_epoch("t1", 3, {"val_loss": 0.2})
    again.end_run("t1", "FINISHED")
    assert again.close(30) == 0
    logged = steps(again, "t1")
    assert [s for s, _ in logged] == [0, 1, 2, 3]
    torch.testing.assert_close([v for _, v in logged], [1.0, 0.5, 1 / 3, 0.2])
    runs = again.runs.client.search_runs([again.runs.experiment_id])
    assert len(runs) == 2
    trial = next(r for r in runs if r.data.tags["mamba_tune.key"] == "t1")
    assert trial.data.tags["mlflow.parentRunId"] == again.runs.run_id(SWEEP_KEY)
    assert trial.data.params == {"learning_rate": "0.001"} and trial.info.status == "FINISHED"


def test_tracking_log_ends_as_lost_the_runs_no_trial_will_end_even_from_the_spool(tmp_path):
    uri, spool = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "pending.jsonl"
    log = new_log(uri, spool)
    log.start_run(SWEEP_KEY, "sweep")
    for key in ("kept", "lost"):  # both opened by a driver that was then killed
        log.start_run(key, key, parent=SWEEP_KEY)
    assert log.close(30) == 0

    spool.write_text('{"op": "end_lost", "key": "sweep", "known": ["kept"]}\n')  # as a killed driver left it
    again = new_log(uri, spool)  # replays the spool first
    again.end_run("kept", "FINISHED")
    assert again.close(30) == 0
    runs = {r.data.tags["mamba_tune.key"]: r for r in again.runs.client.search_runs([again.runs.experiment_id])}
    assert (runs["lost"].info.status, runs["lost"].data.tags["stop_reason"]) == ("KILLED", "lost")
    assert runs["kept"].info.status == "FINISHED" and "stop_reason" not in runs["kept"].data.tags
    assert runs[SWEEP_KEY].info.status == "RUNNING"  # the sweep's own run is never taken for a lost trial


@pytest.mark.faults  # an outage of the tracking server
@pytest.mark.integration
def test_tracking_log_buffers_while_the_server_is_down_and_saves_what_it_cannot_send(tmp_path, mlflow_server, caplog):
    log = new_log(mlflow_server.url, tmp_path / "pending.jsonl")
    log.start_run(SWEEP_KEY, "sweep")
    log.start_run("t1", "trial 1", parent=SWEEP_KEY)
    log.log_epoch("t1", 0, {"val_loss": 1.0})
    assert log.flush(30)

    mlflow_server.stop()
    with caplog.at_level(logging.WARNING, logger="mamba_tune.sweep"):
        start = time.monotonic()
        for epoch in (1, 2, 3):
            log.log_epoch("t1", epoch, {"val_loss": 1.0 - epoch / 10})  # returns at once: training never waits
        assert time.monotonic() - start < 1
        assert not log.flush(3)  # held, not dropped
        assert any("does not answer" in r.getMessage() and "buffered" in r.getMessage() for r in caplog.records)
        mlflow_server.start()
        assert log.flush(90)
        assert any("answers again" in r.getMessage() for r in caplog.records)
    assert [s for s, _ in steps(log, "t1")] == [0, 1, 2, 3]

    mlflow_server.stop()  # down again when the sweep ends: what is unsent is saved, then sent by the next log
    log.log_epoch("t1", 4, {"val_loss": 0.5})
    log.end_run("t1", "FINISHED")
    spool = tmp_path / "pending.jsonl"
    assert log.close(2) == 2 and spool.exists()
    mlflow_server.start()
    replay = new_log(mlflow_server.url, spool)  # `mamba-tune resume`
    assert replay.close(60) == 0 and not spool.exists()
    assert [s for s, _ in steps(replay, "t1")] == [0, 1, 2, 3, 4]
    assert replay.runs.client.get_run(replay.runs.run_id("t1")).info.status == "FINISHED"


def test_a_spool_line_naming_a_file_outside_the_staging_folder_is_not_replayed(tmp_path, caplog):
    """Whoever can write tracking-pending.jsonl cannot make `resume` upload (and delete) a file of its choosing."""
    uri, spool = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep" / "tracking-pending.jsonl"
    log = new_log(uri, spool)
    log.start_run(SWEEP_KEY, "sweep")
    assert log.close(30) == 0
    staged, secret = tmp_path / "sweep" / "tracking" / "sweep" / "space.yaml", tmp_path / "secret.txt"
    staged.parent.mkdir(parents=True)
    staged.write_text("name: t\n")
    secret.write_text("not for MLflow\n")
    escape = tmp_path / "sweep" / "tracking" / ".." / ".." / "secret.txt"  # inside, until '..' is resolved
    spool.write_text("".join(
        f'{{"op": "artifact", "key": "sweep", "path": "{path}", "folder": null, "remove": true}}\n'
        for path in (secret, escape, staged)))
    with caplog.at_level(logging.INFO, logger="mamba_tune.sweep"):
        again = new_log(uri, spool)
        assert again.close(30) == 0
    assert secret.read_text() == "not for MLflow\n"  # neither uploaded nor deleted
    assert not staged.exists()  # the staged file was sent, then removed as its line asked
    uploaded = [a.path for a in again.runs.client.list_artifacts(again.runs.run_id(SWEEP_KEY))]
    assert uploaded == ["space.yaml"]
    assert any("left out 2 write(s)" in r.getMessage() for r in caplog.records)
