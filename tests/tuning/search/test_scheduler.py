"""GatedASHA driven as Ray Tune drives it (no cluster): the gate in front of ASHA, and rungs that survive a resume."""

from __future__ import annotations

import functools
import pickle
from types import SimpleNamespace

from ray.tune.schedulers import TrialScheduler

from tuning.search.gate import GateConfig
from tuning.search.scheduler import GatedASHA, RecordedCurve
from tuning.search.space import SchedulerConfig

CONFIG = SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2)  # rungs at epochs 2 and 4
GATE = GateConfig(epoch=2, ratio_to_e0=0.9)
# val_loss by epoch: `good` learns and completes; `flat` fails the gate at 2; `poor` reaches rung 2 third,
# worse than the rung's median of the two before it; `diverged` is non-finite at epoch 3, after rung 2.
CURVES = {"good": [2.0, 1.5, 1.4, 1.3, 1.2], "flat": [2.6, 2.6, 2.6], "poor": [2.2, 2.1, 2.06],
          "diverged": [2.0, 1.9, 1.7, float("nan")]}


def result(curve: list[float], epoch: int) -> dict:
    finite = [v for v in curve[: epoch + 1] if v == v]
    return {"epoch": epoch, "val_loss": curve[epoch], "best_val_loss": min(finite), "e0_val_loss": curve[0],
            "baseline_persistence": 1.0}


def run(scheduler: GatedASHA, trial_id: str) -> list[str]:
    """One trial through the scheduler as Tune runs it -> its decision at each epoch (it stops at the first STOP)."""
    trial, curve, decisions = SimpleNamespace(trial_id=trial_id), CURVES[trial_id], []
    scheduler.on_trial_add(None, trial)
    for epoch in range(len(curve)):
        decisions.append(scheduler.on_trial_result(None, trial, result(curve, epoch)))
        if decisions[-1] == TrialScheduler.STOP:
            break
    scheduler.on_trial_complete(None, trial, result(curve, epoch))
    return decisions


def recorded(trial_id: str) -> RecordedCurve:
    """The curve a trial's record holds (no diverged epoch) and the last epoch it reported."""
    curve = CURVES[trial_id]
    return RecordedCurve(tuple(v for v in curve if v == v), len(curve) - 1)


def test_the_gate_stops_a_trial_before_asha_and_asha_the_poor_one_at_its_rung():
    scheduler = GatedASHA(CONFIG, GATE)
    assert run(scheduler, "good")[-1] == TrialScheduler.STOP and len(run(scheduler, "flat")) == 3
    assert run(scheduler, "poor") == [TrialScheduler.CONTINUE] * 2 + [TrialScheduler.STOP]


def test_a_resumed_scheduler_rebuilds_its_rungs_and_stops_what_the_straight_run_stops():
    straight = GatedASHA(CONFIG, GATE)
    for trial_id in ("good", "flat", "diverged"):
        run(straight, trial_id)
    finished = {k: recorded(k) for k in ("good", "flat", "diverged")}
    # As `resume` gets it: pickled at the sweep's start, with how to read the trials' curves.
    saved = pickle.dumps(GatedASHA(CONFIG, GATE, curves=functools.partial(dict, finished)))
    resumed = pickle.loads(saved)
    for trial_id in finished:  # Tune re-adds the finished trials first
        resumed.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
    assert resumed.rungs() == straight.rungs()
    assert resumed.rungs()[2] == {"good": 1.4, "flat": 2.6, "diverged": 1.7}
    assert run(resumed, "poor") == run(straight, "poor") == [TrialScheduler.CONTINUE] * 2 + [TrialScheduler.STOP]


def test_a_scheduler_resumed_without_curves_starts_with_empty_rungs():
    resumed = pickle.loads(pickle.dumps(GatedASHA(CONFIG, GATE)))  # and one an older version pickled lacks them
    del resumed.curves
    state = resumed.__dict__.copy()
    older = GatedASHA.__new__(GatedASHA)
    older.__setstate__(state)
    older.on_trial_add(None, SimpleNamespace(trial_id="poor"))
    assert older.rungs() == {2: {}, 4: {}} and older.curves is None
