"""A head that can be lost: the sweep's records travel with its storage.

The sweep runs as on a cluster: its storage a URI (file:// here, s3:// there), its Optuna study and its
MLflow server's store in PostgreSQL. Its driver is killed outright and everything its working folder
held (the sweep folder: manifest, ledger, spool, ray.log) is deleted, as a lost head takes them; `resume`
from another working folder, with only the storage URI, finishes it: every trial once in Ray Tune's
checkpoints and the ledger, in the Optuna study and in MLflow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import optuna
import pytest
from optuna.trial import TrialState

from tests.cli import assert_one_line_error, cli_command, cli_env, run_cli
from tests.processes import process_tree, wait_gone
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.mlflow_server import MlflowServer
from tests.tuning.sweeps import SPACE, ledger, write_space
from tuning.sweep_files import LEDGER, MANIFEST

pytestmark = pytest.mark.integration
TRIALS = 3


def test_a_sweep_whose_head_is_lost_is_finished_from_its_storage_by_another(bars, tmp_path, postgres, monkeypatch):
    env = cli_env(**postgres.env)  # the databases' credentials come from the environment, never the URLs
    monkeypatch.setenv("PGUSER", postgres.user)
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    study_url = postgres.create_database("optuna")
    server = MlflowServer(tmp_path / "mlflow", backend_store=postgres.create_database("mlflow"), env=postgres.env)
    (tmp_path / "mlflow").mkdir()
    bucket = tmp_path / "bucket"
    storage = f"file://{bucket}/sweeps"
    space = write_space(tmp_path, trials=TRIALS, initial=SPACE["initial"][:1])
    head_a, head_b = tmp_path / "head-a", tmp_path / "head-b"
    head_a.mkdir()
    head_b.mkdir()
    server.start()
    try:
        process = subprocess.Popen(cli_command("sweep", "--data", bars, "--space", space, "--storage", storage,
                                               "--study-url", study_url, "--tracking-uri", server.url),
                                   cwd=head_a, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        copy = bucket / "sweeps" / "t"  # the records' copy in the storage
        deadline = time.monotonic() + 600
        while not (copy / LEDGER).exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        ray_processes = process_tree(process.pid)[1:]
        process.kill()  # the head is lost: its driver first...
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == -9, stderr[-3000:]
        assert not wait_gone(ray_processes, timeout_s=120)
        before = ledger(copy)
        assert 1 <= len(before) < TRIALS and ledger(head_a / "runs" / "sweeps" / "t") == before
        assert json.loads((copy / MANIFEST).read_text())["study_url"] == study_url
        shutil.rmtree(head_a)  # ...then all it kept: nothing of the sweep is left but the storage and the servers

        resumed = run_cli("resume", "t", "--storage", storage, cwd=head_b, env=env)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        folder = head_b / "runs" / "sweeps" / "t"
        after = ledger(folder)
        assert len(after) == TRIALS and all(after[k] == record for k, record in before.items())  # kept, not rerun
        assert ledger(copy) == after and not head_a.exists()  # the storage's copy is up to date; the lost folder stays lost
        trained = {p.name for p in (bucket / "sweeps" / "t" / "train").iterdir()}
        study = optuna.load_study(study_name="t", storage=study_url)
        lost = [t for t in study.trials if t.user_attrs.get("stop_reason") == "lost"]
        kept = [t for t in study.trials if t not in lost]
        assert sorted(t.user_attrs["ray_trial_id"] for t in kept) == sorted(after)  # each trial once in Optuna
        assert all(t.state == TrialState.FAIL for t in lost) and all(t.state != TrialState.RUNNING for t in kept)
        assert set(after) <= trained <= set(after) | {t.user_attrs.get("ray_trial_id") for t in lost}  # and Ray
        assert_sweep_logged(server.url, "t", after, tmp_path, lost_allowed=True)  # and MLflow, each once

        again = run_cli("resume", "t", "--storage", storage, cwd=tmp_path, env=env)  # a third head: nothing left
        assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stderr[-3000:]
    finally:
        server.stop()


def test_a_study_url_that_is_no_database_or_holds_a_password_is_refused(bars, tmp_path):
    space = write_space(tmp_path)
    for url, starts in [("optuna.db", "--study-url 'optuna.db': not a database URL"),
                        ("postgresql://optuna:hunter2@db/optuna",
                         "--study-url postgresql://db/optuna holds credentials (user:password@)"),
                        ("postgresql://mamba@127.0.0.1:1/optuna",  # a user name is fine: it gets as far as trying
                         "--study-url postgresql://mamba@127.0.0.1:1/optuna: cannot open the study's database (")]:
        done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps",
                       "--study-url", url)
        assert_one_line_error(done, starts)
        assert "hunter2" not in done.stderr
    assert not (tmp_path / "sweeps").exists()  # nothing written


def test_a_new_sweep_is_refused_where_the_study_database_holds_one_of_its_name(bars, tmp_path, postgres,
                                                                                   monkeypatch):
    study_url = postgres.create_database("optuna")
    monkeypatch.setenv("PGUSER", postgres.user)
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    optuna.create_study(study_name="t", storage=study_url)
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
                   "--study-url", study_url, env=cli_env(**postgres.env))
    assert_one_line_error(done, f"--study-url {study_url} already holds an Optuna study named 't'")
    assert not (tmp_path / "sweeps").exists()
