"""start_ray: what a sweep asks of the Ray it starts on this machine, and of a cluster it joins (ray.init captured)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import ray
from ray.tune.execution import class_cache

from tuning.cluster import ray_address
from tuning.sweep import orphan_groups, ray_env, session
from tuning.sweep.trial_path import trial_path


@pytest.fixture()
def init_calls(monkeypatch):
    """ray.init's keyword arguments and the driver's environment as it started Ray, call by call, with nothing
    started; the driver's environment and Tune's trial actors' restored."""
    calls: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append({**kwargs, "environ": dict(os.environ)}) or
                        SimpleNamespace(dashboard_url="" if kwargs.get("include_dashboard") is False else "x:8265"))
    monkeypatch.setattr(class_cache, "DEFAULT_ENV_VARS", dict(class_cache.DEFAULT_ENV_VARS))
    monkeypatch.setattr(orphan_groups, "_STATE_API", [True])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    saved = dict(os.environ)
    trial_path.cache_clear()
    yield calls
    trial_path.cache_clear()
    os.environ.clear()
    os.environ.update(saved)


def test_a_local_ray_has_no_dashboard_no_preemption_watcher_and_collects_nothing_for_one(init_calls):
    assert session.start_ray(None, trial_path_setting="fast") is True
    (call,) = init_calls
    assert call["address"] == "local" and call["include_dashboard"] is False
    # The Ray started here inherits the driver's environment, in every process: no runtime environment to pay for
    assert "runtime_env" not in call
    env = call["environ"]
    assert env[ray_env.PREEMPTION_WATCHER] == "0"  # one node, started here: nothing can drain it
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
    assert env["RAY_task_events_report_interval_ms"] == "0" and env["RAY_enable_metrics_collection"] == "0"
    assert env["RAY_event_stats"] == "0"
    assert env["PL_DISABLE_FORK"] == "1"  # what Tune would give each trial actor, inherited by every process
    assert orphan_groups._STATE_API == [False]  # no dashboard: the orphan watch never looks


def test_a_local_ray_gives_tune_and_train_nothing_to_hand_on_to_each_actor(init_calls):
    """Tune hands its trial actors, and Train its controllers and workers, the variables of the environment they
    propagate, as a runtime environment each (~0.4 CPU-s a process): once a Ray started here has them, the driver
    keeps none of them, and Tune's trial actors get no environment of their own. The fast trial path's alone."""
    session.start_ray(None, trial_path_setting="fast")
    handed_on = class_cache.ENV_VARS_TO_PROPAGATE | set(ray_env.TUNE_ACTOR_ENV)
    assert {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "RAY_WARN_BLOCKING_GET_INSIDE_ASYNC"} <= handed_on  # Ray's own names
    (call,) = init_calls
    assert set(call["environ"]) & class_cache.ENV_VARS_TO_PROPAGATE  # Ray's processes inherit them...
    assert not set(ray_env.sweep_env(local=True)) & class_cache.ENV_VARS_TO_PROPAGATE & set(os.environ)  # ...not so
    assert class_cache.DEFAULT_ENV_VARS == {}
    assert class_cache._ActorClassCache().get(type("Trainable", (), {}))._default_options["runtime_env"] == {}


def test_on_the_public_trial_path_a_local_ray_leaves_tune_and_train_to_hand_on_what_they_would(init_calls):
    """Ray Tune's private class_cache is a hook of the fast path alone (fast_hooks' TuneActorEnv): on the public path
    Tune and Train hand on the driver's settings as Ray does by default, and Tune's trial actors get their own."""
    given = dict(class_cache.DEFAULT_ENV_VARS)
    assert session.start_ray(None, trial_path_setting="public") is True
    (call,) = init_calls
    assert call["environ"]["PL_DISABLE_FORK"] == "1" and "runtime_env" not in call  # Ray inherits them as before
    handed_on = set(ray_env.sweep_env(local=True)) & class_cache.ENV_VARS_TO_PROPAGATE
    assert "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S" in handed_on and handed_on <= set(os.environ)  # the driver keeps them
    assert class_cache.DEFAULT_ENV_VARS == given  # untouched


def test_a_cluster_keeps_the_preemption_watcher_and_what_its_dashboard_shows(init_calls, monkeypatch):
    monkeypatch.setattr(ray_address, "_check_reachable", lambda address, source: None)
    assert session.start_ray("10.0.0.5:6379", trial_path_setting="fast") is False
    (call,) = init_calls
    assert call["address"] == "10.0.0.5:6379" and "include_dashboard" not in call
    env = call["runtime_env"]["env_vars"]  # the cluster's processes get the sweep's settings with its job
    assert not set(ray_env.LOCAL_RAY_ENV) & set(env)  # the preemption watcher, and what the dashboard shows
    assert os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"  # Tune and Train hand it on as before
    assert class_cache.DEFAULT_ENV_VARS == ray_env.TUNE_ACTOR_ENV == {"PL_DISABLE_FORK": "1"}
    assert env["RAY_TRAIN_METRICS_ENABLED"] == "0" and env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
    assert orphan_groups._STATE_API == [True]  # the cluster's dashboard serves Ray's state API


def test_a_local_ray_asked_for_its_dashboard_starts_it_and_collects_what_it_shows(init_calls):
    assert session.start_ray(None, dashboard=True, trial_path_setting="fast") is True
    (call,) = init_calls
    assert call["address"] == "local" and call["include_dashboard"] is True
    env = call["environ"]
    assert not set(ray_env.DASHBOARD_DATA) & set(env)  # task events, event stats and metrics: collected again
    assert env[ray_env.PREEMPTION_WATCHER] == "0" and env["PL_DISABLE_FORK"] == "1"  # the rest as without it
    assert orphan_groups._STATE_API == [True]  # the dashboard serves Ray's state API: the orphan watch looks


@pytest.mark.parametrize(("setting", "dashboard", "started_with_it"), [("fast", False, False), ("fast", True, True),
                                                                     ("public", False, True), ("public", True, True)])
def test_a_local_ray_starts_its_dashboard_when_asked_and_always_on_the_public_trial_path(init_calls, setting,
                                                                                        dashboard, started_with_it):
    """Ray Train's PlacementGroupCleaner, one per public trial, watches its controller through the dashboard's state
    API, and never ends without it (tests/tuning/sweep/test_public_path_cleanup.py); the fast path has none."""
    assert session.start_ray(None, dashboard=dashboard, trial_path_setting=setting) is True
    (call,) = init_calls
    assert call["address"] == "local" and call["include_dashboard"] is started_with_it
    assert orphan_groups._STATE_API == [started_with_it]  # the orphan watch looks where the state API is served


@pytest.mark.parametrize(("setting", "dashboard"), [("fast", False), ("fast", True), ("public", False),
                                                    ("public", True)])
def test_a_cluster_joined_is_asked_for_no_dashboard_on_either_path(init_calls, monkeypatch, setting, dashboard):
    monkeypatch.setattr(ray_address, "_check_reachable", lambda address, source: None)
    assert session.start_ray("10.0.0.5:6379", dashboard=dashboard, trial_path_setting=setting) is False
    (call,) = init_calls
    assert "include_dashboard" not in call  # the cluster's own, as it was started
