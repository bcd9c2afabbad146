"""The environment of a sweep's Ray processes, and how it reaches them without a runtime environment each.

A Ray started here inherits the driver's environment in every process (raylet, workers, actors). A cluster's
processes get the sweep's settings as its job's runtime environment instead (session.start_ray).

Ray Tune and Ray Train hand some variables of a process's environment on to the actors it starts, as
`runtime_env={"env_vars": ...}`: Tune those of its ENV_VARS_TO_PROPAGATE (Train's among them) and PL_DISABLE_FORK,
to each trial's actor; Train its own, to each controller and worker. An actor with a runtime environment is
started through the node's runtime-env agent, and so is every actor it starts, which inherits it: about 0.4 CPU-s
more a process here (bench/actor_start.py), about 1.2 a trial (a sweep's trial actors, controllers and workers).
On a Ray started here every process has these variables already, so once Ray is up the driver drops the ones Tune
and Train would hand on (`hand_nothing_on`), and Tune's PL_DISABLE_FORK is in the inherited environment instead
of each trial actor's own. This rests on Ray Tune's private `class_cache` (DEFAULT_ENV_VARS, ENV_VARS_TO_PROPAGATE),
a hook of the fast trial path (tuning/sweep/fast_hooks.py: TuneActorEnv); on the public path Tune and Train hand on
what they would, and class_cache is not imported.
"""

from __future__ import annotations

import os
import socket
from typing import Any

RAY_ENV = {  # for every Ray process of the sweep
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5",  # the default 2 s delays every epoch's report by ~1 s
    "RAY_AIR_NEW_OUTPUT": "0",
    # Ray Train's metrics (Prometheus gauges of its controller and workers, through the node's metrics agent):
    # nothing of the sweep reads them, each process of every trial pays for them.
    "RAY_TRAIN_METRICS_ENABLED": "0",
    # A trial's Train controller (an async actor) waits on the sweep's relay (tuning/sweep/relay_callback.py); Ray
    # Train starts its controllers with this set; the fast path starts them without (trial_controller.py).
    "RAY_WARN_BLOCKING_GET_INSIDE_ASYNC": "0",
}
PREEMPTION_WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
NO_AUTOSCALER = "MAMBA_TUNE_NO_AUTOSCALER"  # mamba-tune's own: set in every process of a Ray started here
# A Ray started here has no dashboard, so nothing reads what every process of it would collect for one: task events
# (`ray list tasks`, the timeline), the event loops' handler statistics and Ray's Prometheus metrics. Each process
# of each trial pays for collecting them: about 0.4 CPU-s a trial (bench/trial_start.py's trials, with and without).
LOCAL_RAY_ENV = {
    "RAY_task_events_report_interval_ms": "0",
    "RAY_event_stats": "0",
    "RAY_enable_metrics_collection": "0",
    # Nothing drains (preempts) the one node of a Ray started here: Ray Train's preemption watcher, a process per
    # trial, would have nothing to watch (a cluster's sweep keeps it).
    PREEMPTION_WATCHER: "0",
    # Nor does anything scale it: each trial's Train controller would ask Ray's autoscaling coordinator for its
    # workers' resources, a detached actor the first trial starts and waits for: the fast path's do not
    # (tuning/sweep/lean_trainer.py), the public path's still ask it.
    NO_AUTOSCALER: "1",
}
DASHBOARD_DATA = ("RAY_task_events_report_interval_ms", "RAY_event_stats", "RAY_enable_metrics_collection")
TUNE_ACTOR_ENV = {"PL_DISABLE_FORK": "1"}  # what Ray Tune gives every trial actor (class_cache.DEFAULT_ENV_VARS)


API_SERVER = "RAY_API_SERVER_ADDRESS"  # where Ray's state API clients find the dashboard


def local_dashboard() -> tuple[dict[str, str], dict[str, Any]]:
    """A Ray started here with its dashboard, on a port free now: (the variable every process of that Ray needs to
    find its dashboard, ray.init's arguments). Without it a state API client that names no Ray (Ray Train's
    placement-group cleaner, the orphaned groups' watch) finds this one only where it is the machine's only Ray:
    with two, it fails ("Found multiple active Ray instances") and the cleaner never ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {API_SERVER: f"http://127.0.0.1:{port}"}, {"include_dashboard": True, "dashboard_port": port}


def sweep_env(local: bool, dashboard: bool = False) -> dict[str, str]:
    """The variables every Ray process of the sweep has: on a Ray started here (`local`), Tune's trial actors'
    too (below); with its dashboard (`dashboard`), collecting what the dashboard shows."""
    shown = DASHBOARD_DATA if dashboard else ()
    return RAY_ENV | ({k: v for k, v in LOCAL_RAY_ENV.items() if k not in shown} | TUNE_ACTOR_ENV if local else {})


def tune_actors_get_their_env(own: bool) -> None:
    """Whether Ray Tune gives each trial actor TUNE_ACTOR_ENV as a runtime environment of its own (as it does by
    default): not on a Ray started here, where every process inherits it (sweep_env). The fast path's alone."""
    from ray.tune.execution import class_cache

    class_cache.DEFAULT_ENV_VARS.clear()
    if own:
        class_cache.DEFAULT_ENV_VARS.update(TUNE_ACTOR_ENV)


def hand_nothing_on(env: dict[str, str]) -> None:
    """Once a Ray started here has inherited `env`: drop from this process's environment the variables of it that
    Tune or Train would hand on to each actor they start, in a runtime environment. The fast path's alone."""
    from ray.tune.execution import class_cache

    for name in set(env) & class_cache.ENV_VARS_TO_PROPAGATE:
        os.environ.pop(name, None)
