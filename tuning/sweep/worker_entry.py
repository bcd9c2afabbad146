"""The function Ray Train runs in each worker of a trial, in a module of its own.

Ray Train hands it to the workers pickled by reference, so each worker imports this module to find it, and with it
whatever the module imports. Here that is nothing: the trial's Tune side (tuning/sweep/trainable.py: Ray Tune, the
trial's trainer and Ray Train's callbacks, about 0.3 CPU-s) stays out of the workers, and torch and the model
(tuning/sweep/trial_worker.py) stay out of the Tune side, imported only once the function runs, in a worker.
"""

from __future__ import annotations

from typing import Any


def train_loop(config: dict[str, Any]) -> None:
    """Ray Train's loop in each worker: tuning/sweep/trial_worker.py's."""
    from tuning.sweep.trial_worker import train_worker

    train_worker(config)
