"""A trial that diverges, and a tracking server that goes away mid-sweep: the sweep goes on, nothing is lost.

The diverging sweep also runs with fake credentials in its environment (AWS keys, an MLflow
password), and none of them may reach the sweep's files, its MLflow store or its output.
"""

from __future__ import annotations

import time

import pytest

from tests.cli import cli_env, run_cli
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, ledger, start_after_first_trial, write_space

pytestmark = pytest.mark.integration
# AdamW with beta2 = 0 and no clipping divides each step by the current gradient alone, so a weight
# whose gradient passes near zero takes a step of lr * momentum / eps. With eps 1e-4 that sends the
# weights to inf in the first epoch at a learning rate of 0.5 (and at 0.25), while at 1e-4 a step stays
# below ~1e-3 and the trial learns smoothly: the same under the native, avx2 and default CPU kernels
# (bench/training_outcomes.py). No gate: the healthy trial's completion depends on nothing but
# finishing, and with the other trial stopped before ASHA's rung, it is alone there.
HEALTHY_LR, DIVERGING_LR = 1e-4, 0.5
DIVERGING = {
    "trials": 2,
    "search": {**SPACE["search"], "learning_rate": {"low": 1e-5, "high": 0.6, "log": True}},
    "initial": [{"learning_rate": HEALTHY_LR, "weight_decay": 1e-2, "batch_size": 64},
                {"learning_rate": DIVERGING_LR, "weight_decay": 1e-2, "batch_size": 64}],
    "gate": {"ratio_to_e0": None},
    "run": {**SPACE["run"], "train": {"betas": [0.99, 0.0], "eps": 1e-4, "grad_clip": 0.0, "warmup_fraction": 0.0}},
}
FAKE_SECRETS = {"AWS_ACCESS_KEY_ID": "AKIA" + "FAKEFAKEFAKE1234",  # split: the repository scan finds whole keys
                "AWS_SECRET_ACCESS_KEY": "fake/secret+key/do-not-log-9f3",
                "MLFLOW_TRACKING_PASSWORD": "fake-mlflow-password-7c1"}


@pytest.fixture(scope="module")
def diverging_sweep(bars, tmp_path_factory):
    folder = tmp_path_factory.mktemp("diverging")
    storage, store = folder / "sweeps", folder / "mlflow" / "mlflow.db"
    done = run_cli("sweep", "--data", bars, "--space", write_space(folder, **DIVERGING), "--storage", storage,
                   "--tracking-uri", f"sqlite:///{store}", env=cli_env(**FAKE_SECRETS))
    return folder, storage, store, done


def test_a_diverging_trial_stops_at_once_as_nan_and_never_becomes_the_best(diverging_sweep, tmp_path):
    folder, storage, store, done = diverging_sweep
    assert done.returncode == 0, done.stderr[-3000:]
    records = ledger(storage / "t")
    by_lr = {r["params"]["learning_rate"]: r for r in records.values()}
    assert (by_lr[DIVERGING_LR]["stop_reason"], by_lr[DIVERGING_LR]["stop_epoch"]) == ("nan", 1)  # the first epoch
    assert by_lr[HEALTHY_LR]["stop_reason"] == "completed"  # the sweep went on
    best = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml")
    assert best.returncode == 0 and f"lr {HEALTHY_LR:.3g}," in best.stdout, best.stdout + best.stderr
    assert_sweep_logged(f"sqlite:///{store}", "t", records, tmp_path)  # the diverged run FAILED, the other FINISHED


def test_a_sweep_writes_no_credential_from_its_environment(diverging_sweep):
    folder, storage, store, done = diverging_sweep
    texts = {"stdout": done.stdout, "stderr": done.stderr}
    texts.update({str(p): p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file()})
    assert store.exists() and any("trials.json" in name for name in texts)
    for name, value in FAKE_SECRETS.items():
        leaks = [where for where, text in texts.items() if value in text]
        assert not leaks, f"{name} found in {leaks}"


def test_a_tracking_server_that_goes_away_mid_sweep_loses_nothing(bars, tmp_path, mlflow_server):
    storage = tmp_path / "sweeps"
    space = write_space(tmp_path, trials=3, initial=SPACE["initial"][:1])
    process = start_after_first_trial("--data", bars, "--space", space, "--storage", storage,
                                      "--tracking-uri", mlflow_server.url)
    mlflow_server.stop()  # killed, as a crash would: the trials go on training
    time.sleep(15)
    mlflow_server.start()  # the same store and port
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert "tracking: the store does not answer" in stdout + stderr
    assert "tracking: the store answers again after" in stdout + stderr
    assert_sweep_logged(mlflow_server.url, "t", ledger(storage / "t"), tmp_path)  # every trial, every epoch, once
    assert not (storage / "t" / "tracking-pending.jsonl").exists()  # everything was sent
