"""The Ray Train trainer of one trial on the fast path (tuning/sweep/trial_path.py), without what a trial does not use.

- One worker per trial: Ray Train's DataParallelTrainer with a plain BackendConfig. There is no torch process
  group to set up, so neither the trial's Tune actor nor its Train controller imports torch
  (`import ray.train.torch` alone costs about 3 CPU-seconds in each process).
- Two or more workers: TorchTrainer, whose TorchConfig sets up the process group that DDP needs
  (model/training.py). Either way the reports, checkpoints, FailureConfig and resume are the same.
- Two of Ray Train's default callbacks are left out. Each would start an actor (a process) per trial:
  - DatasetsCallback hands Ray Datasets to the workers. A trial passes Ray none: its Dataset goes through
    the object store.
  - PlacementGroupCleanerCallback removes the worker group's placement group when the controller dies
    without removing it, which happens when Tune stops a trial. The sweep's driver does that for all its
    trials (tuning/sweep/orphan_groups.py).
- On a Ray the sweep started itself (nothing scales its one node), the controller asks no autoscaler for its
  workers' resources. Ray Train's FixedScalingPolicy asks Ray's autoscaling coordinator at the run's start and
  end, waiting each time: a detached actor (a process importing Ray Data, about 1.3 CPU-s) that the first trial
  starts and waits for. A cluster's trials still ask it.
- The controller runs in a host process that the trials of a Tune actor share (tuning/sweep/controller_host.py),
  not in a process of its own per trial; it and the workers are started without a runtime environment of their own
  (tuning/sweep/trial_controller.py).
This rests on private hooks of Ray Train: `_create_default_callbacks` and `_initialize_and_run_controller` of
the trainer, the scaling policy it hands the controller (FixedScalingPolicy's calls to the coordinator),
`worker_group_cls` of the controller, `_get_worker_runtime_env` of the worker group: tuning/sweep/fast_hooks.py
checks them against the Ray installed, and a sweep imports this module only where they fit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import ray
import ray.train
from ray.train.backend import BackendConfig
from ray.train.v2._internal.callbacks.datasets import DatasetsCallback
from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback
from ray.train.v2._internal.execution.scaling_policy import FixedScalingPolicy
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from tuning.sweep.controller_host import HOSTS
from tuning.sweep.ray_env import NO_AUTOSCALER

LEFT_OUT_CALLBACKS = (DatasetsCallback, PlacementGroupCleanerCallback)


class _LeanTrial:
    """Mixed in before a Ray Train trainer: its default callbacks less LEFT_OUT_CALLBACKS, and its TrialController
    run in one of this process's controller hosts."""

    def _create_default_callbacks(self) -> list[Any]:
        return [callback for callback in super()._create_default_callbacks()  # type: ignore[misc]
                if not isinstance(callback, LEFT_OUT_CALLBACKS)]

    def _initialize_and_run_controller(self, **controller_init_kwargs: Any) -> Any:
        policy = controller_init_kwargs["scaling_policy"]
        if type(policy) is FixedScalingPolicy and os.environ.get(NO_AUTOSCALER) == "1":
            controller_init_kwargs["scaling_policy"] = UnrequestedScaling(policy.scaling_config)
        host = HOSTS.take()
        try:
            if threading.current_thread() is threading.main_thread():  # not in a Tune trial's thread
                self._register_sigint_handler(host)  # type: ignore[attr-defined]
            return ray.get(host.run.remote(controller_init_kwargs))
        finally:
            HOSTS.give_back(host)


class UnrequestedScaling(FixedScalingPolicy):
    """Ray Train's fixed scaling, asking no autoscaler for the workers' resources: nothing scales a Ray the sweep
    started. With no request sent, its end cancels none (`_cancel_resource_request` finds no client)."""

    def after_controller_start(self, train_run_context: Any) -> None:
        """Ray Train's registers the run with the autoscaling coordinator and sends its request, waiting."""

    def _maybe_send_resource_request(self) -> None:
        """Ray Train's sends the request again every so often, waiting, from each scaling decision."""


class SingleWorkerTrainer(_LeanTrial, DataParallelTrainer):
    """A one-worker trial: no process group, no torch outside the worker."""


def lean_trainer(loop: Callable[[dict[str, Any]], None], config: dict[str, Any], workers: int,
                 scaling: ray.train.ScalingConfig, run_config: ray.train.RunConfig) -> DataParallelTrainer:
    """The fast path's trainer of a trial: `loop(config)` in each of `workers` workers."""
    if workers == 1:
        return SingleWorkerTrainer(loop, train_loop_config=config, backend_config=BackendConfig(),
                                   scaling_config=scaling, run_config=run_config)
    return _data_parallel_torch_trainer()(loop, train_loop_config=config, scaling_config=scaling,
                                          run_config=run_config)


def _data_parallel_torch_trainer() -> type[DataParallelTrainer]:
    """TorchTrainer without the unused callbacks, imported only by a trial with several workers."""
    from ray.train.torch import TorchTrainer

    class DataParallelTorchTrainer(_LeanTrial, TorchTrainer):
        """A trial of several workers: DDP over torch's process group."""

    return DataParallelTorchTrainer
