"""`sweep --notify` / `resume --notify` (tuning/cli/sweep_notify.py): one POST to a real local webhook when the sweep
ends, fails or is interrupted; a webhook that is down costs one warning line, never the exit code."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from tests.cli import free_port, run_cli
from tests.tuning.sweeps import copy_sweep
from tests.tuning.webhook_server import HangingWebhook, Webhook
from tuning.cli import sweep_notify
from tuning.cli.sweep_notify import notified, notify_url, resume_notify_url
from tuning.errors import UsageError
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.notify_config import NotifyConfig
from tuning.sweep.notification import DEADLINE_S
from tuning.sweep_files import LEDGER, TEST_LOOK, TRAIN_LOOK, sweep_paths

HINT = "mamba-tune resume t --storage S"
WEBHOOK_BASE = "https://hooks.slack.com/services/T000/B000"


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


def test_sweep_end_tells_the_sweeps_own_verdict_never_a_train_looks(paths):
    """A look `train --look` took after the sweep's (a model trained again) counts, and is never the sweep's verdict."""
    (own,) = json.loads((paths.folder / TEST_LOOK).read_text())
    train = {"look": 2, "by": TRAIN_LOOK, "trial_id": "t_1", "test_loss": 0.9,
             "vs_har": {"test_loss": 0.431, "dm_pvalue": 0.5}}
    (paths.folder / TEST_LOOK).write_text(json.dumps([own, train]))
    end = sweep_notify.sweep_end("ended", paths, 3, STORE, "sweep-id", HINT)
    assert end.verdict == "test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=0.03): better than HAR"
    (paths.folder / TEST_LOOK).write_text(json.dumps([train]))  # only a train look: the sweep has no verdict
    assert sweep_notify.sweep_end("ended", paths, 3, STORE, "sweep-id", HINT).verdict is None


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
@pytest.mark.faults  # a sweep resumed
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


@pytest.mark.integration
@pytest.mark.faults  # an older version's sweep.json, resumed
def test_resume_of_a_sweep_whose_json_kept_its_webhook_tells_it_once_and_drops_it(finished_sweep, tmp_path, webhook):
    storage, _ = copy_sweep(finished_sweep, tmp_path)
    kept = storage / "t" / "sweep.json"
    older = json.loads(kept.read_text())
    kept.write_text(json.dumps({**older, "space": {**older["space"], "notify": {"webhook": webhook.url}}}))

    first = run_cli("resume", "t", "--storage", storage)  # as earlier versions did, without --notify
    assert first.returncode == 0, first.stderr[-3000:]
    assert [body["status"] for body in bodies(webhook)] == ["ended"]
    assert f"this resume notifies {webhook.host}; later resumes notify with --notify URL or MAMBA_TUNE_WEBHOOK" \
        in first.stderr
    manifest = json.loads(kept.read_text())
    assert "SECRETTOKEN" not in kept.read_text() + first.stdout + first.stderr and manifest["webhook_set"] is True

    again = run_cli("resume", "t", "--storage", storage)
    assert again.returncode == 0 and len(webhook.received) == 1, again.stderr[-3000:]
    assert "warning: sweep t was started with a webhook, whose URL (a secret) is kept in no file" in again.stderr


def test_sweep_refuses_a_bad_notify_in_one_line_before_ray_starts(tmp_path):
    from tests.cli import assert_one_line_error
    from tests.tuning.sweeps import write_space

    space = write_space(tmp_path)
    done = run_cli("sweep", "--data", tmp_path / "nope.parquet", "--space", space, "--storage", tmp_path / "s",
                   "--notify", "ftp://files.example/SECRETTOKEN")
    assert_one_line_error(done, "--notify: webhook must be http or https")
    assert "SECRETTOKEN" not in done.stderr


def test_notify_url_takes_the_flag_then_the_environment_then_the_space():
    space = SimpleNamespace(notify=NotifyConfig("https://hooks.slack.com/services/T/B/SPACE"))
    env = {"MAMBA_TUNE_WEBHOOK": "https://hooks.slack.com/services/T/B/ENV"}
    assert notify_url("http://127.0.0.1:9/flag", space, env) == "http://127.0.0.1:9/flag"
    assert notify_url(None, space, env) == "https://hooks.slack.com/services/T/B/ENV"
    assert notify_url(None, space, {"MAMBA_TUNE_WEBHOOK": ""}) == "https://hooks.slack.com/services/T/B/SPACE"


def test_notify_url_refuses_a_bad_webhook_in_the_environment_by_its_name_without_repeating_it():
    with pytest.raises(UsageError, match=r"^MAMBA_TUNE_WEBHOOK: webhook holds a user:password@ before its host") \
            as refused:
        notify_url(None, SimpleNamespace(notify=None), {"MAMBA_TUNE_WEBHOOK": "https://bot:pa/SECRET@hooks.example/x"})
    assert "SECRET" not in str(refused.value)


def manifest_of(legacy: str | None = None, webhook_set: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name="t", legacy_webhook=legacy, webhook_set=webhook_set or legacy is not None)


def test_resume_notify_url_tells_an_older_sweeps_kept_webhook_once_and_says_it_is_dropped(capsys):
    assert resume_notify_url(None, manifest_of(f"{WEBHOOK_BASE}/SECRETTOKEN"), {}) == f"{WEBHOOK_BASE}/SECRETTOKEN"
    err = capsys.readouterr().err
    assert err.startswith("note: sweep t's sweep.json held its webhook URL") and err.count("\n") == 1
    assert "dropped from sweep.json and its storage copy; this resume notifies hooks.slack.com;" in err
    assert "SECRETTOKEN" not in err
    assert resume_notify_url("http://127.0.0.1:9/flag", manifest_of(f"{WEBHOOK_BASE}/X"), {}) == \
        "http://127.0.0.1:9/flag"  # the flag over the kept URL, which is dropped all the same
    assert "this resume notifies 127.0.0.1:9;" in capsys.readouterr().err


def test_resume_notify_url_warns_a_sweep_started_with_a_webhook_that_none_is_given_now(capsys):
    assert resume_notify_url(None, manifest_of(webhook_set=True), {}) is None
    err = capsys.readouterr().err
    assert err.startswith("warning: sweep t was started with a webhook, whose URL (a secret) is kept in no file; this "
                          "resume notifies none: give --notify URL or set MAMBA_TUNE_WEBHOOK") and err.count("\n") == 1
    env = {"MAMBA_TUNE_WEBHOOK": "http://127.0.0.1:9/env"}
    assert resume_notify_url(None, manifest_of(webhook_set=True), env) == "http://127.0.0.1:9/env"
    assert resume_notify_url(None, manifest_of(), {}) is None and capsys.readouterr().err == ""


class HangingStore:
    """A tracking server that accepts and never answers: its client's calls wait until the test ends."""

    uri, embedded = "http://mlflow.example:5000", False

    def __init__(self) -> None:
        self.released = threading.Event()

    def client(self):
        self.released.wait(120)
        raise ConnectionError("no answer")


def test_notified_bounds_the_mlflow_lookup_when_the_store_hangs(webhook, paths, monkeypatch):
    monkeypatch.setattr(sweep_notify, "LOOKUP_S", 1.0)
    store = HangingStore()
    try:
        start = time.monotonic()
        assert notified(webhook.url, lambda: 0, paths, 3, store, "sweep-id", HINT) == 0
        assert time.monotonic() - start < 10
    finally:
        store.released.set()
    (body,) = bodies(webhook)
    assert body["status"] == "ended" and body["mlflow"] == {"uri": store.uri, "run_id": None, "link": None}


@pytest.mark.faults
def test_notified_ends_by_its_bounds_when_both_the_store_and_the_webhook_hang(paths, capsys):
    store, webhook = HangingStore(), HangingWebhook("trickle")
    try:
        start = time.monotonic()
        assert notified(webhook.url, lambda: 0, paths, 3, store, "sweep-id", HINT) == 0
        took = time.monotonic() - start
    finally:
        store.released.set()
        webhook.stop()
    assert took < sweep_notify.LOOKUP_S + DEADLINE_S + 10  # 20 s of bounds and the slack of a shared machine
    err = capsys.readouterr().err
    assert err.startswith("warning: notification to 127.0.0.1:") and "no answer within 10 s" in err
    assert "SECRETTOKEN" not in err
