"""The Ray Train trainer of one trial, on the sweep's trial path (tuning/sweep/trial_path.py).

- public API: Ray Train's TorchTrainer, as Ray documents it for a Tune function trainable; one worker or several,
  its TorchConfig sets up torch's process group (a group of one trains without DDP: model/training.py).
- fast: tuning/sweep/lean_trainer.py, imported only on that path (it imports Ray's private modules).
Either way the reports, checkpoints, FailureConfig and resume are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ray.train

from tuning.search.resources import TrialPlan


def trial_trainer(loop: Callable[[dict[str, Any]], None], config: dict[str, Any], plan: TrialPlan,
                  run_config: ray.train.RunConfig, fast: bool) -> Any:
    """The trainer of a trial: `loop(config)` in each of plan.workers workers; -> a Ray Train trainer (`.fit()`)."""
    scaling = ray.train.ScalingConfig(num_workers=plan.workers, use_gpu=plan.gpus_per_worker > 0,
                                      resources_per_worker=plan.worker_resources())
    if fast:
        from tuning.sweep.lean_trainer import lean_trainer

        return lean_trainer(loop, config, plan.workers, scaling, run_config)
    from ray.train.torch import TorchTrainer

    return TorchTrainer(loop, train_loop_config=config, scaling_config=scaling, run_config=run_config)
