"""Learning-rate schedule: linear warmup, then cosine decay to a floor."""

from __future__ import annotations

import math


def lr_factor(step: float, total_steps: int, warmup_steps: int, min_fraction: float) -> float:
    """Multiplier of the peak learning rate for optimizer step `step` (0-based).

    Steps 0..warmup_steps-1 rise linearly to 1 ((step+1)/warmup_steps); the rest follow
    a half cosine from 1 down to min_fraction at the last step. `step` may be fractional: a
    run whose epochs take other step counts than its schedule's (a refit, on more samples)
    maps its steps onto the schedule's (model/training.py), never above 1 in warmup.
    """
    if step < warmup_steps:
        return min((step + 1) / warmup_steps, 1.0)
    decay_steps = max(total_steps - warmup_steps - 1, 1)
    progress = min((step - warmup_steps) / decay_steps, 1.0)
    return min_fraction + (1 - min_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
