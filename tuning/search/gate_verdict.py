"""A sweep no trial of which passed the gate: the answer it ends with (exit code NO_WINNER_EXIT), not an error.

On bars where nothing the space holds beats HAR by the gate's epoch (daily stock bars with a small space often do),
every trial is stopped by the gate or by the stopping rule before it, and the sweep has no winner. That is a
finding: it says so, with HAR's validation loss at the gate's epoch and the best trial's there, and what may change
it: more bars, another horizon, a relaxed gate (the gate settings, with the values that would have let the best trial
through). Only when every trial that reached the gate's epoch was stopped there by the gate: one let through beat it.
Pure logic over the ledger's records (tuning/search/ledger.py); the CLI prints it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuning.search.gate import GateConfig, gate_decision
from tuning.search.ledger import TrialRecord

ENDED = {"gate": "stopped by the gate", "asha": "stopped by the stopping rule", "nan": "diverged", "error": "failed",
         "invalid": "refused by the recipe"}  # how a trial ended, by its stop reason (tuning/search/gate.py)
NO_WINNER_EXIT = 3  # `sweep`/`resume`: every trial ran, none passed the gate, so no configuration is handed over
OUTCOME_TAG, NO_WINNER = "mamba_tune.outcome", "no winner: no trial passed the gate"  # on the sweep's MLflow run


@dataclass(frozen=True)
class GateVerdict:
    """How the best trial did at the gate's epoch, against HAR and against the gate."""

    epoch: int  # the gate's epoch
    best_loss: float  # the best validation loss any trial had at that epoch
    trial_id: str  # that trial
    har: float  # HAR's validation loss (the trial's yardstick)
    gate_limit: float  # the highest loss the gate passed for that trial
    stopped: dict[str, int]  # trials by why they ended: gate, asha, ...
    relaxed: tuple[str, ...]  # --set pairs under which the best trial would have passed the gate

    @property
    def beat_har(self) -> bool:
        return self.best_loss < self.har

    def lines(self) -> list[str]:
        """The answer, then the advice: two lines."""
        ended = ", ".join(f"{n} {ENDED.get(why, why)}" for why, n in self.stopped.items())
        if self.beat_har:
            answer = (f"no configuration passed the gate at epoch {self.epoch}: the best trial's validation loss "
                      f"{self.best_loss:.4f} (trial {self.trial_id}) beat HAR's {self.har:.4f} there, but not the "
                      f"gate's limit {self.gate_limit:.4f} (trials: {ended})")
        else:
            answer = (f"no configuration beat HAR at the gate's epoch {self.epoch}: HAR's validation loss "
                      f"{self.har:.4f}, the best trial's {self.best_loss:.4f} (trial {self.trial_id}); trials: {ended}")
        gate = f"a relaxed gate ({' or '.join(f'--set {pair}' for pair in self.relaxed)})" if self.relaxed \
            else "a relaxed gate (gate.epoch, gate.ratio_to_baseline, gate.ratio_to_e0, gate.threshold)"
        advice = (f"what may change it: more bars (a longer history), another horizon (--set data.horizon=N), "
                  f"a space that learns sooner, or {gate}; no winner, so nothing to export")
        return [answer, advice]


def gate_verdict(records: list[TrialRecord], gate: GateConfig, max_epochs: int) -> GateVerdict | None:
    """The verdict when the gate stopped at least one search trial and every search trial that reached the gate's
    epoch stopped there, the gate stopping it (or its loss diverging); the best is the best of the gate's. None
    otherwise: a trial that got past the gate (stopped later by the stopping rule, a failure, or one that completed:
    a winner) beat the gate, so "nothing beat HAR at the gate" would be untrue; trials that all failed: an error."""
    search = [r for r in records if r.stage == "search"]
    if any(_passed_the_gate(r, gate) for r in search):
        return None
    at_gate = [(r.val_curve[gate.epoch], r) for r in search if r.stop_reason == "gate"
               and len(r.val_curve) > gate.epoch and math.isfinite(r.val_curve[gate.epoch])]
    if not at_gate:
        return None
    loss, best = min(at_gate, key=lambda pair: pair[0])
    result = best.final_result()
    limit = gate.limit(best.e0_val_loss, gate.baseline_of(result))
    stopped: dict[str, int] = {}
    for record in search:
        stopped[record.stop_reason] = stopped.get(record.stop_reason, 0) + 1
    return GateVerdict(gate.epoch, loss, best.trial_id, best.baseline_har, limit, stopped,
                       _relaxed(gate, loss, best.e0_val_loss, gate.baseline_of(result), max_epochs))


def _passed_the_gate(record: TrialRecord, gate: GateConfig) -> bool:
    """Whether a search trial went on past the gate's check: it ran beyond the gate's epoch, or reported that epoch
    and the gate let it through (the stopping rule stopped it there, or it failed after the check)."""
    if record.stop_reason == "completed" or record.stop_epoch > gate.epoch:
        return True
    if record.stop_epoch < gate.epoch or record.stop_reason in ("gate", "nan", "invalid"):
        return False
    if len(record.val_curve) <= gate.epoch:  # it failed before it reported the gate's epoch
        return False
    result = record.final_result()
    return gate_decision(gate, gate.epoch, record.val_curve[gate.epoch], record.e0_val_loss,
                         gate.baseline_of(result)) is None


def _relaxed(gate: GateConfig, loss: float, e0: float, baseline: float, max_epochs: int) -> tuple[str, ...]:
    """The gate settings, each with the value that would have passed a loss of `loss` (its rule alone), and a later
    gate epoch where the schedule has room for one."""
    pairs = []
    if gate.ratio_to_baseline is not None and math.isfinite(baseline) and baseline > 0 \
            and loss > gate.ratio_to_baseline * baseline:
        pairs.append(f"gate.ratio_to_baseline={_up(loss / baseline)}")
    if gate.ratio_to_e0 is not None and e0 > 0 and loss > gate.ratio_to_e0 * e0:
        pairs.append(f"gate.ratio_to_e0={_up(loss / e0)}")
    if gate.threshold is not None and loss > gate.threshold:
        pairs.append(f"gate.threshold={_up(loss, digits=4)}")
    if gate.epoch < max_epochs:
        pairs.append(f"gate.epoch={min(max_epochs, 2 * gate.epoch)}")
    return tuple(pairs)


def _up(value: float, digits: int = 2) -> str:
    """`value` rounded up to `digits` decimals: the least round setting that passes it."""
    scale = 10 ** digits
    return f"{math.ceil(value * scale - 1e-9) / scale:g}"
