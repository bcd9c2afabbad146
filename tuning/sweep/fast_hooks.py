"""The private hooks of Ray the fast trial path rests on, checked against the Ray installed: names, signatures and
what Ray does with them.

The fast path (tuning/sweep/lean_trainer.py) spares each trial processes and CPU-seconds through private parts of
Ray Train and Ray Tune; a Ray release may move or reshape any of them. Each hook below is checked the way the fast
path uses it; the first that does not fit sends the sweep down the public path (tuning/sweep/trial_path.py), and
tests/tuning/sweep/test_fast_hooks.py fails naming it. Nothing here starts Ray.

    hook                what the fast path does with it
    LeanCallbacks       DataParallelTrainer._create_default_callbacks, less DatasetsCallback and the
                        PlacementGroupCleanerCallback (lean_trainer.py: a process each per trial)
    ControllerHost      DataParallelTrainer._initialize_and_run_controller(**kwargs) and _register_sigint_handler;
                        TrainController's run, get_result, get_state, get_worker_group, _set_state(AbortedState()),
                        its callback manager and run context (controller_host.py)
    UnrequestedScaling  FixedScalingPolicy's after_controller_start and _maybe_send_resource_request, overridden
                        (lean_trainer.py)
    TrialWorkerGroup    TrainController.worker_group_cls, WorkerGroup._get_worker_runtime_env (trial_controller.py)
    HostBarrier         worker_group.SynchronizationActor and state._shutdown_sync_actor, replaced in a host; the
                        barrier methods Ray Train calls (host_barrier.py)
    TuneActorEnv        ray.tune.execution.class_cache's DEFAULT_ENV_VARS and ENV_VARS_TO_PROPAGATE (ray_env.py)
    HostPlacement       ray._raylet.RAY_NODE_ID_KEY, a label selecting the driver's node for a host
                        (controller_host.py start_host)
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuning.sweep.ray_env import TUNE_ACTOR_ENV

TRAIN = "ray.train.v2._internal"
SERVED_BARRIER_METHODS = frozenset({"broadcast_from_rank_zero", "set_required_ranks", "reset"})  # host_barrier.py
SERVED_CONTROLLER_METHODS = frozenset({"get_all_reported_checkpoints"})  # what workers call: controller_host.py


class Misfit(Exception):
    """A hook that is not as the fast path uses it: what is missing or changed."""


def find(module: str, *names: str) -> Any:
    """`module`'s attribute `names[0]`, then its attribute `names[1]`, ... (Misfit naming the first not found)."""
    try:
        found: Any = importlib.import_module(module)
    except ImportError:
        raise Misfit(f"{module} not found") from None
    where = module
    for name in names:
        if not hasattr(found, name):
            raise Misfit(f"{where}.{name} not found")
        found, where = getattr(found, name), f"{where}.{name}"
    return found


def need(condition: bool, what: str) -> None:
    """Misfit(`what`) unless `condition`."""
    if not condition:
        raise Misfit(what)


def parameters(function: Callable[..., Any]) -> list[str]:
    """The names of `function`'s parameters, self included."""
    return list(inspect.signature(function).parameters)


def source(function: Callable[..., Any]) -> str:
    """`function`'s source text (Misfit where Ray ships none to read)."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        raise Misfit(f"the source of {function.__qualname__} cannot be read") from None


@functools.cache
def ray_train_sources() -> tuple[str, ...]:
    """The text of every module of Ray Train V2."""
    return tuple(path.read_text() for path in Path(find("ray.train.v2").__file__).parent.rglob("*.py"))


def remote_calls(actor: str) -> set[str]:
    """The methods Ray Train V2 calls as `<...actor>.METHOD.remote(`."""
    return {name for text in ray_train_sources() for name in re.findall(actor + r"\.(\w+)\.remote", text)}


def check_lean_callbacks() -> None:
    trainer = find("ray.train.v2.api.data_parallel_trainer", "DataParallelTrainer")
    need(callable(getattr(trainer, "_create_default_callbacks", None)),
         "DataParallelTrainer._create_default_callbacks not found")
    need(parameters(trainer._create_default_callbacks) == ["self"],
         "DataParallelTrainer._create_default_callbacks takes arguments")
    built = source(trainer._create_default_callbacks)
    for module, name in ((f"{TRAIN}.callbacks.datasets", "DatasetsCallback"),
                         (f"{TRAIN}.callbacks.placement_group_callback", "PlacementGroupCleanerCallback")):
        find(module, name)
        need(name in built, f"DataParallelTrainer._create_default_callbacks no longer makes a {name}")


def check_controller_host() -> None:
    trainer = find("ray.train.v2.api.data_parallel_trainer", "DataParallelTrainer")
    run = getattr(trainer, "_initialize_and_run_controller", None)
    need(callable(run), "DataParallelTrainer._initialize_and_run_controller not found")
    need(parameters(run) == ["self", "controller_init_kwargs"]
         and inspect.signature(run).parameters["controller_init_kwargs"].kind == inspect.Parameter.VAR_KEYWORD,
         "DataParallelTrainer._initialize_and_run_controller no longer takes the controller's keywords")
    need("_initialize_and_run_controller(" in source(trainer.fit),
         "DataParallelTrainer.fit no longer runs its controller through _initialize_and_run_controller")
    started = source(trainer.fit) + source(run)
    need("scaling_policy" in started, "the controller's keywords no longer hold its scaling_policy")
    need("runtime_env" in source(run), "DataParallelTrainer._initialize_and_run_controller no longer starts the "
                                       "controller as an actor with a runtime environment")
    need(callable(getattr(trainer, "_register_sigint_handler", None)),
         "DataParallelTrainer._register_sigint_handler not found")
    controller = find(f"{TRAIN}.execution.controller", "TrainController")
    for method in ("run", "get_result", "get_state", "get_worker_group", "_set_state", "get_all_reported_checkpoints",
                   "abort"):
        need(callable(getattr(controller, method, None)), f"TrainController.{method} not found")
    need(inspect.iscoroutinefunction(controller.run), "TrainController.run is no longer a coroutine")
    made = source(controller.__init__)
    for attribute in ("_controller_callback_manager", "_train_run_context"):
        need(f"self.{attribute}" in made, f"TrainController.{attribute} not found")
    need("before_controller_abort" in source(controller.abort), "TrainController.abort no longer calls the "
                                                                 "before_controller_abort hook")
    find(f"{TRAIN}.execution.controller.state", "AbortedState")
    called = remote_calls("controller_actor")
    unserved = ", ".join(sorted(called - SERVED_CONTROLLER_METHODS))
    need(not unserved, f"Ray Train's workers call {unserved} on their controller, which the host does not serve")


def check_unrequested_scaling() -> None:
    policy = find(f"{TRAIN}.execution.scaling_policy", "FixedScalingPolicy")
    need(parameters(getattr(policy, "after_controller_start", lambda: None)) == ["self", "train_run_context"],
         "FixedScalingPolicy.after_controller_start(train_run_context) not found")
    need(parameters(getattr(policy, "_maybe_send_resource_request", lambda: None)) == ["self"],
         "FixedScalingPolicy._maybe_send_resource_request() not found")
    need("scaling_config" in parameters(policy.__init__), "FixedScalingPolicy no longer takes a scaling_config")


def check_trial_worker_group() -> None:
    controller = find(f"{TRAIN}.execution.controller", "TrainController")
    group = find(f"{TRAIN}.execution.worker_group", "WorkerGroup")
    need(getattr(controller, "worker_group_cls", None) is group, "TrainController.worker_group_cls is not WorkerGroup")
    runtime_env = getattr(group, "_get_worker_runtime_env", None)
    need(callable(runtime_env) and parameters(runtime_env) == ["custom_runtime_env"],
         "WorkerGroup._get_worker_runtime_env(custom_runtime_env) not found")


def check_host_barrier() -> None:
    actor = find(f"{TRAIN}.execution.checkpoint.sync_actor", "SynchronizationActor")
    group_module = find(f"{TRAIN}.execution.worker_group.worker_group")
    state = find(f"{TRAIN}.execution.worker_group.state")
    need(getattr(group_module, "SynchronizationActor", None) is actor,
         "the worker group module no longer starts SynchronizationActor by its global name")
    need("SynchronizationActor.options(" in source(group_module.WorkerGroup._start_impl),
         "WorkerGroup._start_impl no longer starts a SynchronizationActor")
    need(parameters(getattr(state, "_shutdown_sync_actor", lambda: None)) == ["sync_actor"],
         "worker_group.state._shutdown_sync_actor(sync_actor) not found")
    for holder in ("WorkerGroupState", "WorkerGroupStateBuilder"):
        need("_shutdown_sync_actor(self.sync_actor)" in source(find(state.__name__, holder, "shutdown")),
             f"{holder}.shutdown no longer ends its barrier through _shutdown_sync_actor")
    barrier = actor.__ray_actor_class__
    need({"timeout_s", "warn_interval_s"} <= set(parameters(barrier.__init__)),
         "SynchronizationActor no longer takes timeout_s and warn_interval_s")
    called = remote_calls("sync_actor")
    need(called <= SERVED_BARRIER_METHODS, f"Ray Train calls {', '.join(sorted(called - SERVED_BARRIER_METHODS))} "
                                           "on a SynchronizationActor, which the host does not serve")
    for name in called:
        need(inspect.iscoroutinefunction(getattr(barrier, name, None)),
             f"SynchronizationActor.{name} is not a coroutine")


def check_tune_actor_env() -> None:
    given = find("ray.tune.execution.class_cache", "DEFAULT_ENV_VARS")
    need(isinstance(given, dict) and set(given) <= set(TUNE_ACTOR_ENV),
         f"class_cache.DEFAULT_ENV_VARS is not a dict of {', '.join(TUNE_ACTOR_ENV)}")
    need(isinstance(find("ray.tune.execution.class_cache", "ENV_VARS_TO_PROPAGATE"), set | frozenset),
         "class_cache.ENV_VARS_TO_PROPAGATE is not a set")


def check_host_placement() -> None:
    need(isinstance(find("ray._raylet", "RAY_NODE_ID_KEY"), str), "ray._raylet.RAY_NODE_ID_KEY is not a label")


HOOKS: dict[str, Callable[[], None]] = {
    "LeanCallbacks": check_lean_callbacks,
    "ControllerHost": check_controller_host,
    "UnrequestedScaling": check_unrequested_scaling,
    "TrialWorkerGroup": check_trial_worker_group,
    "HostBarrier": check_host_barrier,
    "TuneActorEnv": check_tune_actor_env,
    "HostPlacement": check_host_placement,
}


def misfits() -> dict[str, str]:
    """hook -> what about it does not fit the Ray installed; empty when the fast path fits. A check that fails on a
    change it does not foresee names what it raised: the sweep takes the public path, it does not crash."""
    found = {}
    for hook, check in HOOKS.items():
        try:
            check()
        except Misfit as exc:
            found[hook] = str(exc)
        except Exception as exc:  # noqa: BLE001 - any change of Ray's private parts: not the fast path's
            found[hook] = f"its check raised {type(exc).__name__}: {exc}"
    return found
