"""The private hooks of Ray the fast trial path rests on (tuning/sweep/fast_hooks.py), and the path a sweep takes
(tuning/sweep/trial_path.py).

On the Ray installed every hook fits: when a Ray release changes one, the first test fails naming it. Each of the
others changes Ray as a release might (one attribute removed, or given another signature or behaviour) and asks
that the check names that hook and what changed, and that the sweep then takes the public path, not a crash; a
sweep forced onto the fast path is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import ray
import ray._raylet
from ray.train.v2._internal.callbacks import placement_group_callback
from ray.train.v2._internal.execution import scaling_policy
from ray.train.v2._internal.execution.checkpoint.sync_actor import SynchronizationActor
from ray.train.v2._internal.execution.controller import TrainController
from ray.train.v2._internal.execution.controller import state as controller_state
from ray.train.v2._internal.execution.worker_group import WorkerGroup
from ray.train.v2._internal.execution.worker_group import state as group_state
from ray.train.v2._internal.execution.worker_group import worker_group as group_module
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
from ray.tune.execution import class_cache

from tuning.errors import UsageError
from tuning.sweep import fast_hooks
from tuning.sweep import trial_path as trial_path_module
from tuning.sweep.trial_path import trial_path

BARRIER = SynchronizationActor.__ray_actor_class__


@pytest.fixture(autouse=True)
def path_decided_afresh():
    """trial_path decides once per process: each test decides on the Ray it has made, and leaves no decision."""
    trial_path.cache_clear()
    yield
    trial_path.cache_clear()


def test_every_hook_of_the_fast_path_fits_the_ray_installed():
    found = fast_hooks.misfits()
    assert found == {}, "; ".join(f"{hook} hook: {what}" for hook, what in found.items())
    assert set(fast_hooks.HOOKS) == {"LeanCallbacks", "ControllerHost", "UnrequestedScaling", "TrialWorkerGroup",
                                     "HostBarrier", "TuneActorEnv", "HostPlacement"}
    chosen = trial_path("auto")
    assert chosen.fast and chosen.describe() == f"fast (Ray {ray.__version__})"
    assert trial_path("fast").fast


# Ray's parts as a release might change them: defined here, so their source is what the checks read.
def takes_its_datasets(self, datasets): ...
def makes_no_callbacks(self): return []  # noqa: E704
def takes_the_controller(self, controller): ...
def starts_the_controller_here(self, **controller_init_kwargs): ...
def runs_synchronously(self): ...
def aborts_without_its_callbacks(self): ...
def made_without_hooks_or_context(self, *args, **kwargs): ...
def after_start_with_more(self, train_run_context, coordinator): ...
def sends_with_a_timeout(self, timeout_s): ...
def policy_of_workers(self, num_workers): ...
def runtime_env_of_a_rank(custom_runtime_env, rank): ...
def starts_no_barrier(self, *args, **kwargs): ...
def shuts_down_every_actor(sync_actor, timeout_s): ...
def barrier_without_warnings(self, timeout_s): ...
def resets_synchronously(self): ...
def fits_without_the_controller_hook(self): ...
def shuts_down_its_barrier_itself(self): ...


RAY_TRAIN_SOURCES = fast_hooks.ray_train_sources


def sources_with(text: str) -> Callable[[], tuple[str, ...]]:
    """Ray Train V2's sources, one module of `text` added."""
    return lambda: (*RAY_TRAIN_SOURCES(), text)


def removed(owner: Any, name: str) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda monkeypatch: monkeypatch.delattr(owner, name)


def replaced(owner: Any, name: str, value: Any) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda monkeypatch: monkeypatch.setattr(owner, name, value)


CONTROLLER_METHODS = ("run", "get_result", "get_state", "get_worker_group", "_set_state", "get_all_reported_checkpoints",
                      "abort")

# (hook, the change of Ray, what the check says of it)
CHANGES = [
    ("LeanCallbacks", removed(DataParallelTrainer, "_create_default_callbacks"),
     "DataParallelTrainer._create_default_callbacks not found"),
    ("LeanCallbacks", replaced(DataParallelTrainer, "_create_default_callbacks", takes_its_datasets),
     "DataParallelTrainer._create_default_callbacks takes arguments"),
    ("LeanCallbacks", replaced(DataParallelTrainer, "_create_default_callbacks", makes_no_callbacks),
     "DataParallelTrainer._create_default_callbacks no longer makes a DatasetsCallback"),
    ("LeanCallbacks", removed(placement_group_callback, "PlacementGroupCleanerCallback"),
     "placement_group_callback.PlacementGroupCleanerCallback not found"),
    ("ControllerHost", replaced(DataParallelTrainer, "_initialize_and_run_controller", takes_the_controller),
     "DataParallelTrainer._initialize_and_run_controller no longer takes the controller's keywords"),
    ("ControllerHost", replaced(DataParallelTrainer, "_initialize_and_run_controller", starts_the_controller_here),
     "no longer starts the controller as an actor with a runtime environment"),
    ("ControllerHost", replaced(DataParallelTrainer, "fit", fits_without_the_controller_hook),
     "DataParallelTrainer.fit no longer runs its controller through _initialize_and_run_controller"),
    ("ControllerHost", replaced(fast_hooks, "ray_train_sources",
                                sources_with("ray.get(self.controller_actor.get_run_status.remote())")),
     "Ray Train's workers call get_run_status on their controller, which the host does not serve"),
    ("ControllerHost", removed(DataParallelTrainer, "_register_sigint_handler"),
     "DataParallelTrainer._register_sigint_handler not found"),
    *[("ControllerHost", removed(TrainController, method), f"TrainController.{method} not found")
      for method in CONTROLLER_METHODS],
    ("ControllerHost", replaced(TrainController, "run", runs_synchronously), "TrainController.run is no longer a coroutine"),
    ("ControllerHost", replaced(TrainController, "__init__", made_without_hooks_or_context),
     "TrainController._controller_callback_manager not found"),
    ("ControllerHost", replaced(TrainController, "abort", aborts_without_its_callbacks),
     "TrainController.abort no longer calls the before_controller_abort hook"),
    ("ControllerHost", removed(controller_state, "AbortedState"), "controller.state.AbortedState not found"),
    ("UnrequestedScaling", replaced(scaling_policy.FixedScalingPolicy, "after_controller_start", after_start_with_more),
     "FixedScalingPolicy.after_controller_start(train_run_context) not found"),
    ("UnrequestedScaling", replaced(scaling_policy.FixedScalingPolicy, "_maybe_send_resource_request",
                                    sends_with_a_timeout), "FixedScalingPolicy._maybe_send_resource_request() not found"),
    ("UnrequestedScaling", replaced(scaling_policy.FixedScalingPolicy, "__init__", policy_of_workers),
     "FixedScalingPolicy no longer takes a scaling_config"),
    ("TrialWorkerGroup", replaced(TrainController, "worker_group_cls", type("ElasticWorkerGroup", (WorkerGroup,), {})),
     "TrainController.worker_group_cls is not WorkerGroup"),
    ("TrialWorkerGroup", replaced(WorkerGroup, "_get_worker_runtime_env", staticmethod(runtime_env_of_a_rank)),
     "WorkerGroup._get_worker_runtime_env(custom_runtime_env) not found"),
    ("HostBarrier", removed(group_module, "SynchronizationActor"),
     "the worker group module no longer starts SynchronizationActor by its global name"),
    ("HostBarrier", replaced(WorkerGroup, "_start_impl", starts_no_barrier),
     "WorkerGroup._start_impl no longer starts a SynchronizationActor"),
    # a change no check foresees (it raises): named all the same
    ("HostBarrier", removed(WorkerGroup, "_start_impl"), "its check raised AttributeError: "),
    ("HostBarrier", replaced(group_state, "_shutdown_sync_actor", shuts_down_every_actor),
     "worker_group.state._shutdown_sync_actor(sync_actor) not found"),
    *[("HostBarrier", replaced(getattr(group_state, holder), "shutdown", shuts_down_its_barrier_itself),
       f"{holder}.shutdown no longer ends its barrier through _shutdown_sync_actor")
      for holder in ("WorkerGroupState", "WorkerGroupStateBuilder")],
    ("HostBarrier", replaced(BARRIER, "__init__", barrier_without_warnings),
     "SynchronizationActor no longer takes timeout_s and warn_interval_s"),
    ("HostBarrier", replaced(BARRIER, "reset", resets_synchronously), "SynchronizationActor.reset is not a coroutine"),
    ("TuneActorEnv", replaced(class_cache, "DEFAULT_ENV_VARS", {"PL_DISABLE_FORK": "1", "RAY_TUNE_NEW": "1"}),
     "class_cache.DEFAULT_ENV_VARS is not a dict of PL_DISABLE_FORK"),
    ("TuneActorEnv", removed(class_cache, "ENV_VARS_TO_PROPAGATE"), "class_cache.ENV_VARS_TO_PROPAGATE not found"),
    ("HostPlacement", removed(ray._raylet, "RAY_NODE_ID_KEY"), "ray._raylet.RAY_NODE_ID_KEY not found"),
]
CHANGE_IDS = [f"{hook}-{index}" for index, (hook, _, _) in enumerate(CHANGES)]


def test_every_hook_has_a_change_of_ray_it_is_tested_against():
    assert {hook for hook, _, _ in CHANGES} == set(fast_hooks.HOOKS)


@pytest.mark.parametrize(("hook", "change", "what"), CHANGES, ids=CHANGE_IDS)
def test_a_hook_ray_changed_is_named_and_the_sweep_takes_the_public_path(hook, change, what, monkeypatch):
    change(monkeypatch)
    found = fast_hooks.misfits()
    assert set(found) == {hook} and what in found[hook], found
    chosen = trial_path("auto")
    assert not chosen.fast
    assert chosen.describe() == f"public API (Ray {ray.__version__}: {hook} hook: {found[hook]})"
    with pytest.raises(UsageError) as refused:
        trial_path("fast")
    message = str(refused.value)
    assert "\n" not in message and f"its {hook} hook ({found[hook]})" in message
    assert "leave it auto (or set public)" in message


def test_the_public_path_asked_for_never_checks_the_hooks(monkeypatch):
    def checked() -> dict[str, str]:
        raise AssertionError("the hooks were checked")

    monkeypatch.setattr(trial_path_module, "misfits", checked)
    chosen = trial_path("public")
    assert not chosen.fast
    assert chosen.describe() == f"public API (Ray {ray.__version__}: resources.trial_path is public)"
