"""start_ray: what a sweep asks of the Ray it starts on this machine, and of a cluster it joins (ray.init captured)."""

from __future__ import annotations

import os

import pytest
import ray

from tuning.cluster import ray_address
from tuning.sweep import session


@pytest.fixture()
def init_calls(monkeypatch):
    """ray.init's keyword arguments, call by call, with nothing started; the driver's environment restored."""
    calls: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    saved = dict(os.environ)
    yield calls
    os.environ.clear()
    os.environ.update(saved)


def test_a_local_ray_has_its_own_dashboard_and_no_preemption_watcher(init_calls):
    assert session.start_ray(None) is True
    (call,) = init_calls
    assert call["address"] == "local" and call["include_dashboard"] is True
    # The Ray started here inherits the driver's environment, in every process: no runtime environment to pay for
    assert "runtime_env" not in call
    env = os.environ
    assert env["RAY_API_SERVER_ADDRESS"] == f"http://127.0.0.1:{call['dashboard_port']}"
    assert env[session.PREEMPTION_WATCHER] == "0"  # one node, started here: nothing can drain it
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"


def test_a_cluster_keeps_the_preemption_watcher(init_calls, monkeypatch):
    monkeypatch.setattr(ray_address, "_check_reachable", lambda address, source: None)
    assert session.start_ray("10.0.0.5:6379") is False
    (call,) = init_calls
    assert call["address"] == "10.0.0.5:6379" and "include_dashboard" not in call
    env = call["runtime_env"]["env_vars"]  # the cluster's processes get the sweep's settings with its job
    assert session.PREEMPTION_WATCHER not in env
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
