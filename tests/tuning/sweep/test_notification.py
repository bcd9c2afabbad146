"""The sweep's notification (tuning/sweep/notification.py): the JSON body, built pure, and its POST to a real
local webhook."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest

from tests.cli import free_port
from tests.tuning.webhook_server import HangingWebhook, Webhook
from tuning.sweep.notification import (
    DEADLINE_S,
    ENDED,
    FAILED,
    INTERRUPTED,
    NotifyError,
    SweepEnd,
    notification,
    post,
)

VERDICT = "test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=0.03): better than HAR"
LINK = "http://mlflow:5000/#/experiments/1/runs/abc"


def end(status: str, **changes) -> SweepEnd:
    values = {"sweep": "smoke", "status": status, "trials": 5, "trials_asked": 8, "best_val_loss": 0.23114,
              "verdict": None, "mlflow_uri": "http://mlflow:5000", "mlflow_run": "abc", "mlflow_link": LINK,
              "resume_hint": "mamba-tune resume smoke"}
    return SweepEnd(**{**values, **changes})


def test_notification_of_an_ended_sweep_says_its_verdict_and_mlflow_link():
    assert notification(end(ENDED, trials=8, verdict=VERDICT)) == {
        "text": f"mamba-tune sweep smoke ended: 8/8 trials, best val 0.2311\n{VERDICT}\nMLflow: {LINK}",
        "sweep": "smoke", "status": "ended", "trials": 8, "trials_asked": 8, "best_val_loss": 0.23114,
        "verdict": VERDICT, "error": None, "mlflow": {"uri": "http://mlflow:5000", "run_id": "abc", "link": LINK}}


def test_notification_of_an_interrupted_sweep_says_how_to_continue_it():
    body = notification(end(INTERRUPTED, mlflow_run=None, mlflow_link=None))
    assert body["text"] == ("mamba-tune sweep smoke was interrupted: 5/8 trials, best val 0.2311\n"
                            "continue with `mamba-tune resume smoke`\nMLflow: http://mlflow:5000")
    assert (body["status"], body["mlflow"]) == ("interrupted", {"uri": "http://mlflow:5000", "run_id": None,
                                                                "link": None})


def test_notification_of_a_failed_sweep_says_why_and_no_best_without_one():
    body = notification(end(FAILED, trials=0, best_val_loss=None, error="RuntimeError: boom"))
    assert body["text"] == ("mamba-tune sweep smoke failed: RuntimeError: boom (0/8 trials)\n"
                            f"continue with `mamba-tune resume smoke`\nMLflow: {LINK}")
    assert (body["status"], body["error"], body["best_val_loss"]) == ("failed", "RuntimeError: boom", None)


def test_notification_sends_no_non_finite_loss():
    assert notification(end(ENDED, best_val_loss=math.inf))["best_val_loss"] is None  # JSON has no inf


def test_post_sends_the_body_as_json_to_the_webhook():
    webhook = Webhook()
    try:
        post(webhook.url, notification(end(ENDED)))
    finally:
        webhook.stop()
    assert webhook.received == [("/services/T000/B000/SECRETTOKEN", notification(end(ENDED)))]


def test_post_raises_notify_error_on_an_error_answer_without_the_url():
    webhook = Webhook(status=500)
    try:
        with pytest.raises(NotifyError, match=r"^it answered HTTP 500 ") as failed:
            post(webhook.url, {"text": "x"})
    finally:
        webhook.stop()
    assert "SECRETTOKEN" not in str(failed.value)


def test_post_raises_notify_error_when_nothing_listens():
    with pytest.raises(NotifyError, match=r"[Cc]onnection refused"):
        post(f"http://127.0.0.1:{free_port()}/services/T/B/SECRET", {"text": "x"}, deadline_s=2)


@pytest.fixture()
def slow_names(monkeypatch):
    """Name resolution that takes a minute (a resolver that does not answer), released when the test ends."""
    released, resolve = threading.Event(), socket.getaddrinfo

    def slow(*args, **kwargs):
        released.wait(60)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    yield
    released.set()


def test_post_gives_up_at_its_deadline_on_a_webhook_that_answers_a_byte_at_a_time():
    webhook = HangingWebhook("trickle")  # no socket timeout fires on it: only the deadline ends the POST
    try:
        start = time.monotonic()
        with pytest.raises(NotifyError, match=r"^no answer within 1 s \(name resolution, connection and answer "
                                              r"together\)$"):
            post(webhook.url, {"text": "x"}, deadline_s=1)
        assert webhook.accepted.is_set() and time.monotonic() - start < 10
    finally:
        webhook.stop()


@pytest.mark.faults
@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_post_to_a_webhook_that_accepts_and_never_answers_returns_by_the_default_deadline(mode):
    webhook = HangingWebhook(mode)
    try:
        start = time.monotonic()
        with pytest.raises(NotifyError, match=rf"^no answer within {DEADLINE_S:g} s") as failed:
            post(webhook.url, {"text": "x"})
        assert time.monotonic() - start < 20  # 10 s and the slack of a shared machine
    finally:
        webhook.stop()
    assert "SECRETTOKEN" not in str(failed.value)


@pytest.mark.faults
def test_post_counts_name_resolution_in_its_deadline(slow_names):
    start = time.monotonic()
    with pytest.raises(NotifyError, match=rf"^no answer within {DEADLINE_S:g} s"):
        post(f"http://localhost:{free_port()}/services/T/B/SECRET", {"text": "x"})
    assert time.monotonic() - start < 20


def test_notification_names_the_objective_its_best_val_loss_is_in():
    body = notification(end(ENDED, trials=8, objective="qlike"))
    assert body["objective"] == "qlike"
    assert body["text"].startswith("mamba-tune sweep smoke ended: 8/8 trials, best val 0.2311 (QLIKE)\n")
    assert "objective" not in notification(end(ENDED))  # not known: left out, as before objectives
