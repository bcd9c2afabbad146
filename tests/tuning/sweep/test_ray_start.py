"""start_ray: what a sweep asks of the Ray it starts on this machine, and of a cluster it joins (ray.init captured)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import ray

from tuning.cluster import ray_address
from tuning.sweep import orphan_groups, session


@pytest.fixture()
def init_calls(monkeypatch):
    """ray.init's keyword arguments, call by call, with nothing started; the driver's environment restored."""
    calls: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs) or SimpleNamespace(
        dashboard_url="" if kwargs.get("include_dashboard") is False else "127.0.0.1:8265"))
    monkeypatch.setattr(orphan_groups, "_STATE_API", [True])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    saved = dict(os.environ)
    yield calls
    os.environ.clear()
    os.environ.update(saved)


def test_a_local_ray_has_no_dashboard_and_no_preemption_watcher(init_calls):
    assert session.start_ray(None) is True
    (call,) = init_calls
    assert call["address"] == "local" and call["include_dashboard"] is False
    # The Ray started here inherits the driver's environment, in every process: no runtime environment to pay for
    assert "runtime_env" not in call
    env = os.environ
    assert env[session.PREEMPTION_WATCHER] == "0"  # one node, started here: nothing can drain it
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
    assert orphan_groups._STATE_API == [False]  # no dashboard: the orphan watch never looks


def test_a_cluster_keeps_the_preemption_watcher(init_calls, monkeypatch):
    monkeypatch.setattr(ray_address, "_check_reachable", lambda address, source: None)
    assert session.start_ray("10.0.0.5:6379") is False
    (call,) = init_calls
    assert call["address"] == "10.0.0.5:6379" and "include_dashboard" not in call
    env = call["runtime_env"]["env_vars"]  # the cluster's processes get the sweep's settings with its job
    assert session.PREEMPTION_WATCHER not in env
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
    assert orphan_groups._STATE_API == [True]  # the cluster's dashboard serves Ray's state API
