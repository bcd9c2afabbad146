"""Hyperband's brackets as Ray's AsyncHyperBandScheduler lays them out, without Ray: each bracket's rungs and the
chance that a new trial goes to it. Shared by the rule (schedulers/hyperband.py, which draws a trial's bracket) and
the sweep's time left (tuning/search/eta.py, which weighs each bracket's epochs by it). ASHA is one bracket.
"""

from __future__ import annotations

import hashlib
import math

from tuning.search.scheduler_config import SchedulerConfig


def bracket_rungs(scheduler: SchedulerConfig) -> list[tuple[int, ...]]:
    """Each bracket's rungs in epochs, as Ray makes them: bracket s has scheduler.rung_count(s) rungs at
    grace_period * reduction_factor^(s + k), k = 0, 1, ... (one at max_epochs included). asha: one bracket."""
    count = scheduler.brackets if scheduler.kind == "hyperband" else 1
    return [tuple(scheduler.grace_period * scheduler.reduction_factor ** (s + k)
                  for k in range(scheduler.rung_count(s))) for s in range(count)]


def bracket_weights(rung_counts: list[int]) -> list[float]:
    """The chance Ray puts a new trial in each bracket: e^(rungs - most rungs), normalised to sum to 1."""
    weights = _ray_weights(rung_counts)
    return [weight / sum(weights) for weight in weights]


def bracket_index(trial_id: str, rung_counts: list[int]) -> int:
    """The bracket a trial goes to: Ray's weights (bracket_weights), drawn with a number in [0, 1) that is a hash of
    the trial id, the same in every process and every run."""
    weights = _ray_weights(rung_counts)
    draw = int.from_bytes(hashlib.sha256(trial_id.encode()).digest()[:8], "big") / 2**64 * sum(weights)
    for index, weight in enumerate(weights):
        draw -= weight
        if draw < 0:
            return index
    return len(weights) - 1


def _ray_weights(rung_counts: list[int]) -> list[float]:
    """Ray's unnormalised weights, e^(rungs - most rungs) per bracket (AsyncHyperBandScheduler.on_trial_add)."""
    return [math.e ** (count - max(rung_counts)) for count in rung_counts]
