"""How the CLI writes a loss against its baselines: one wording for `train`, `sweep` and `best`."""

from __future__ import annotations

import math
from typing import Any

from tuning.tracking.objective import title

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
    """The one look at the test segment, as `train`, `sweep` and `best` print it; source: what was scored. The
    objective its losses are in is named where the look records it (every look since objectives)."""
    objective = f"; {title(scores['objective'])}" if scores.get("objective") else ""
    return (f"test loss {scores['test_loss']:.4f} on {scores['n_test']:,} test samples ({source}{objective}); "
            f"{versus_baselines(scores['test_loss'], scores)}")


SIGNIFICANCE = 0.05  # a Diebold-Mariano p-value below it: the difference from the reference is beyond noise


def verdict_line(winner_loss: float, reference_loss: float, pvalue: float, reference: str = "HAR") -> str:
    """Whether the winner beat `reference` on the test segment, in words, from the two test losses and the
    Diebold-Mariano p-value of their per-sample losses (model/diebold_mariano.py):
    'test segment: winner 0.412 vs HAR 0.431 (-4.4%, DM p=0.03): better than HAR'."""
    change = _percent_change(winner_loss, reference_loss)
    p = _pvalue_text(pvalue)
    significant = math.isfinite(pvalue) and pvalue < SIGNIFICANCE
    if significant and winner_loss < reference_loss:
        verdict = f"better than {reference}"
    elif significant and winner_loss > reference_loss:
        verdict = f"worse than {reference}"
    else:
        verdict = f"not distinguishable from {reference} ({p})"
    return f"test segment: winner {winner_loss:.3f} vs {reference} {reference_loss:.3f} ({change}, DM {p}): {verdict}"


def _percent_change(value: float, reference: float) -> str:
    """'+4.9%': value relative to reference, to a tenth of a percent; n/a when either is not finite and non-zero."""
    if not finite(value, reference):
        return "n/a"
    change = round((value / reference - 1) * 100, 1)
    return f"{change + 0.0:+.1f}%"  # + 0.0: no '-0.0%'


def _pvalue_text(pvalue: float) -> str:
    """'p=0.03', 'p=0.004', 'p<0.001'; never a rounding that lands on the other side of SIGNIFICANCE
    (0.0496 is 'p=0.0496', not 'p=0.05')."""
    if not math.isfinite(pvalue):
        return "p=n/a"
    if pvalue < 0.001:
        return "p<0.001"
    for places in range(2 if pvalue >= 0.01 else 3, 6):
        text = f"{pvalue:.{places}f}"
        if (float(text) < SIGNIFICANCE) == (pvalue < SIGNIFICANCE):
            return f"p={text}"
    return f"p<{SIGNIFICANCE}"
