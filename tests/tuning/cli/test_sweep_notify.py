"""`sweep --notify` / `resume --notify` (tuning/cli/sweep_notify.py): one POST to a real local webhook when the sweep
ends, fails or is interrupted; a webhook that is down costs one warning line, never the exit code."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.cli import free_port, run_cli
from tests.tuning.sweeps import copy_sweep
from tests.tuning.webhook_server import Webhook
from tuning.cli.sweep_notify import notified, notify_url
from tuning.errors import UsageError
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.notify_config import NotifyConfig
from tuning.sweep_files import LEDGER, TEST_LOOK, sweep_paths

HINT = "mamba-tune resume t --storage S"


def unreachable_client():
    raise ConnectionError("no store here")


STORE = SimpleNamespace(uri="http://mlflow.example:5000", embedded=False, client=unreachable_client)


@pytest.fixture()
def webhook():
    server = Webhook()
    yield server
    server.stop()


@pytest.fixture()
def paths(tmp_path):
    """Sweep t's folder with two finished search trials and its look at the test segment."""
    paths = sweep_paths(str(tmp_path), "t")
    paths.folder.mkdir(parents=True)
    ledger = Ledger(paths.folder / LEDGER)
    for trial_id, reason, best in (("t_1", "completed", 0.25), ("t_2", "asha", 0.5)):
        ledger.add(TrialRecord(trial_id=trial_id, params={"learning_rate": 1e-3}, stop_reason=reason, stop_epoch=4,
                               best_val_loss=best, best_epoch=3, e0_val_loss=1.0, baseline_persistence=1.0,
                               train_s=1.0))
    look = {"trial_id": "t_1", "test_loss": 0.412, "vs_har": {"test_loss": 0.431, "dm_pvalue": 0.03}}
    (paths.folder / TEST_LOOK).write_text(json.dumps([look]))
    return paths


def bodies(webhook: Webhook) -> list[dict]:
    assert all(path == "/services/T000/B000/SECRETTOKEN" for path, _ in webhook.received)
    return [body for _, body in webhook.received]


def test_notified_tells_an_ended_sweep_its_trials_best_and_verdict(webhook, paths, capsys):
    assert notified(webhook.url, lambda: 0, paths, 3, STORE, "sweep-id", HINT) == 0
    (body,) = bodies(webhook)
    verdict = "test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=0.03): better than HAR"
    assert body == {"text": f"mamba-tune sweep t ended: 2/3 trials, best val 0.2500\n{verdict}\n"
                            "MLflow: http://mlflow.example:5000",
                    "sweep": "t", "status": "ended", "trials": 2, "trials_asked": 3, "best_val_loss": 0.25,
                    "verdict": verdict, "error": None,
                    "mlflow": {"uri": "http://mlflow.example:5000", "run_id": None, "link": None}}
    assert capsys.readouterr().err == ""


def test_notified_tells_an_interrupted_sweep_by_its_exit_code_or_ctrl_c(webhook, paths):
    assert notified(webhook.url, lambda: 130, paths, 3, STORE, "sweep-id", HINT) == 130

    def ctrl_c() -> int:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        notified(webhook.url, ctrl_c, paths, 3, STORE, "sweep-id", HINT)
    assert [b["status"] for b in bodies(webhook)] == ["interrupted", "interrupted"]
    assert f"continue with `{HINT}`" in bodies(webhook)[0]["text"]


def test_notified_tells_a_failed_sweep_why_and_raises_on(webhook, paths):
    def boom() -> int:
        raise RuntimeError("the object store is full\nmore lines")

    with pytest.raises(RuntimeError, match="object store"):
        notified(webhook.url, boom, paths, 3, STORE, "sweep-id", HINT)
    assert notified(webhook.url, lambda: 1, paths, 3, STORE, "sweep-id", HINT) == 1
    (raised, exited) = bodies(webhook)
    assert (raised["status"], raised["error"]) == ("failed", "RuntimeError: the object store is full")
    assert (exited["status"], exited["error"]) == ("failed", "exit code 1; its error line says why")


def test_notified_with_the_webhook_down_warns_once_and_keeps_the_exit_code(paths, capsys):
    down = f"http://127.0.0.1:{free_port()}/services/T000/B000/SECRETTOKEN"
    assert notified(down, lambda: 0, paths, 3, STORE, "sweep-id", HINT) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: notification to {down.split('/')[2]} failed: ")
    assert "SECRETTOKEN" not in err


def test_notified_without_a_webhook_only_runs_the_sweep(paths):
    assert notified(None, lambda: 130, paths, 3, STORE, "sweep-id", HINT) == 130


def test_notify_url_prefers_the_flag_to_the_space_and_refuses_a_bad_one_without_repeating_it():
    space = SimpleNamespace(notify=NotifyConfig("https://hooks.slack.com/services/T/B/X"))
    assert notify_url(None, space) == "https://hooks.slack.com/services/T/B/X"
    assert notify_url("http://127.0.0.1:9/hook", space) == "http://127.0.0.1:9/hook"
    assert notify_url(None, SimpleNamespace(notify=None)) is None
    with pytest.raises(UsageError, match=r"^--notify: webhook must be http or https, got 'ftp'") as refused:
        notify_url("ftp://user:SECRET@files.example/x", space)
    assert "SECRET" not in str(refused.value)


@pytest.mark.integration
def test_resume_notify_tells_the_webhook_the_sweeps_end_and_verdict(finished_sweep, tmp_path, webhook):
    storage, uri = copy_sweep(finished_sweep, tmp_path)
    done = run_cli("resume", "t", "--storage", storage, "--notify", webhook.url)  # nothing to resume: no Ray
    assert done.returncode == 0 and "nothing to resume" in done.stdout, done.stderr[-3000:]
    (body,) = bodies(webhook)
    verdict = finished_sweep[3].stdout.splitlines()[-1]  # the verdict against HAR, the sweep's last line
    assert verdict.startswith("test segment: winner ") and " vs HAR " in verdict
    assert (body["sweep"], body["status"], body["trials"], body["trials_asked"]) == ("t", "ended", 5, 5)
    assert body["verdict"] == verdict and body["mlflow"]["uri"] == uri and body["mlflow"]["run_id"]
    assert "SECRETTOKEN" not in done.stdout + done.stderr


def test_sweep_refuses_a_bad_notify_in_one_line_before_ray_starts(tmp_path):
    from tests.cli import assert_one_line_error
    from tests.tuning.sweeps import write_space

    space = write_space(tmp_path)
    done = run_cli("sweep", "--data", tmp_path / "nope.parquet", "--space", space, "--storage", tmp_path / "s",
                   "--notify", "ftp://files.example/SECRETTOKEN")
    assert_one_line_error(done, "--notify: webhook must be http or https")
    assert "SECRETTOKEN" not in done.stderr
