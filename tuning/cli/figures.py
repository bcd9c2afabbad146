"""How the CLI writes a loss against its baselines: one wording for `train`, `sweep` and `best`."""

from __future__ import annotations

import math
from typing import Any

BASELINE_LABELS = (("har", "HAR"), ("persistence", "persistence"), ("mean", "train mean"))


def ratio(value: float, reference: float) -> str:
    """value / reference to two places; n/a when either is not a finite non-zero number."""
    return f"{value / reference:.2f}" if finite(value, reference) else "n/a"


def finite(*values: float) -> bool:
    return all(math.isfinite(v) and v != 0 for v in values)


def versus_baselines(loss: float, scores: dict[str, Any]) -> str:
    """'HAR 0.7100 (ratio 0.98), persistence ...' from the baseline_* entries of `scores`."""
    return ", ".join(f"{label} {scores[f'baseline_{name}']:.4f} (ratio {ratio(loss, scores[f'baseline_{name}'])})"
                     for name, label in BASELINE_LABELS)


def one_look_line(scores: dict[str, Any], source: str) -> str:
    """The one look at the test segment, as `train`, `sweep` and `best` print it; source: what was scored."""
    return (f"test loss {scores['test_loss']:.4f} on {scores['n_test']:,} test samples ({source}); "
            f"{versus_baselines(scores['test_loss'], scores)}")
