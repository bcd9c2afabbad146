"""GatedASHA driven as Ray Tune drives it (no cluster): the gate in front of ASHA, and rungs that survive a resume
and an extension (`resume --trials N`)."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from ray.tune.schedulers import TrialScheduler

from tuning.search.curves import RecordedCurve
from tuning.search.gate import GateConfig
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.scheduler import GatedASHA
from tuning.search.space import SchedulerConfig
from tuning.sweep.trial_files import HISTORY, SweepCurves

CONFIG = SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2)  # rungs at epochs 2 and 4
GATE = GateConfig(epoch=2, ratio_to_e0=0.9)
# A sweep of six search trials, t1-t3 in its first Tune experiment and t4-t6 in an extension. ASHA decides at rung 2
# (rung 4 is the last epoch), on the best val_loss there against the median of those before: t1 (1.4) and t3 (1.3) go
# on, t2 (1.6) stops; t4 (1.45) stops at the median 1.4; t5 (1.42) goes on at 1.425; t6 (1.422) stops at 1.42 with
# t5 counted, and would go on at 1.425 without it.
SWEEP = {"t1": [2.0, 1.5, 1.4, 1.3, 1.2], "t2": [2.0, 1.7, 1.6, 1.5, 1.4], "t3": [2.0, 1.4, 1.3, 1.25, 1.1],
         "t4": [2.0, 1.6, 1.45, 1.3, 1.2], "t5": [2.0, 1.5, 1.42, 1.35, 1.3], "t6": [2.0, 1.5, 1.422, 1.3, 1.2]}
# The finalists t1 and t3 trained again on fold 2 (c3 interrupted: not in the ledger). Counted at rung 2 (1.9 each)
# they would raise its median: t4 would go on from a fresh extension, t6 from a restored one.
CONFIRMS = {"c1": [2.2, 2.0, 1.9, 1.8, 1.7], "c2": [2.2, 2.0, 1.9, 1.85, 1.8], "c3": [2.2, 2.0, 1.9, 1.8]}
# val_loss by epoch: `good` learns and completes; `flat` fails the gate at 2; `poor` reaches rung 2 third,
# worse than the rung's median of the two before it; `diverged` is non-finite at epoch 3, after rung 2.
CURVES = {"good": [2.0, 1.5, 1.4, 1.3, 1.2], "flat": [2.6, 2.6, 2.6], "poor": [2.2, 2.1, 2.06],
          "diverged": [2.0, 1.9, 1.7, float("nan")], **SWEEP, **CONFIRMS}


def result(curve: list[float], epoch: int) -> dict:
    finite = [v for v in curve[: epoch + 1] if v == v]
    return {"epoch": epoch, "val_loss": curve[epoch], "best_val_loss": min(finite), "e0_val_loss": curve[0],
            "baseline_persistence": 1.0}


def report(scheduler: GatedASHA, trial_id: str, epochs: range) -> list[str]:
    """A trial's results for `epochs` as Tune reports them -> the decision at each (it stops at the first STOP)."""
    trial, decisions = SimpleNamespace(trial_id=trial_id), []
    for epoch in epochs:
        decisions.append(scheduler.on_trial_result(None, trial, result(CURVES[trial_id], epoch)))
        if decisions[-1] == TrialScheduler.STOP:
            break
    return decisions


def run(scheduler: GatedASHA, trial_id: str) -> list[str]:
    """One trial through the scheduler as Tune runs it -> its decision at each epoch (it stops at the first STOP)."""
    scheduler.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
    decisions = report(scheduler, trial_id, range(len(CURVES[trial_id])))
    scheduler.on_trial_complete(None, SimpleNamespace(trial_id=trial_id), result(CURVES[trial_id], len(decisions) - 1))
    return decisions


def recorded(trial_id: str) -> RecordedCurve:
    """The curve a trial's record holds (no diverged epoch) and the last epoch it reported."""
    curve = CURVES[trial_id]
    return RecordedCurve(tuple(v for v in curve if v == v), len(curve) - 1)


@dataclass(frozen=True)
class Curves:
    """A curve source (scheduler.CurveSource) over given curves: the recorded trials', and running trials' checkpoints."""

    finished: dict[str, RecordedCurve]
    running: dict[str, RecordedCurve] = field(default_factory=dict)

    def recorded(self) -> dict[str, RecordedCurve]:
        return dict(self.finished)

    def unrecorded(self, trial_id: str) -> RecordedCurve | None:
        return None if trial_id in self.finished else self.running.get(trial_id)


def sweep_curves(folder: Path) -> SweepCurves:
    """The curve source session._fit gives each Tune experiment's scheduler, for a sweep kept in `folder`."""
    return SweepCurves(folder / "trials.json", str(folder), str(folder / "train"))


def checkpoint(folder: Path, trial_id: str, last_epoch: int) -> None:
    """The checkpoint Ray Train keeps of a trial that got to `last_epoch`, with its history."""
    path = folder / "train" / trial_id / "checkpoint_2026-11-30_08-00-00"
    path.mkdir(parents=True, exist_ok=True)
    history = [{"epoch": e, "val_loss": v} for e, v in enumerate(CURVES[trial_id][: last_epoch + 1])]
    (path / HISTORY).write_text(json.dumps(history))


def record(folder: Path, trial_id: str, stop_epoch: int, stage: str = "search", fold: int = 1) -> None:
    """A trial's ledger record, as the sweep's callback writes it when the trial ends at `stop_epoch`; its checkpoint
    goes on to its last epoch (a stopped trial runs on until Tune kills it): read, it would tell more than the record."""
    curve = CURVES[trial_id][: stop_epoch + 1]
    Ledger(folder / "trials.json").add(TrialRecord(
        trial_id=trial_id, params={}, stop_reason="completed" if stop_epoch == CONFIG.max_epochs else "asha",
        stop_epoch=stop_epoch, best_val_loss=min(curve), best_epoch=curve.index(min(curve)), e0_val_loss=curve[0],
        baseline_persistence=1.0, train_s=1.0, val_curve=tuple(curve), stage=stage, fold=fold))
    checkpoint(folder, trial_id, len(CURVES[trial_id]) - 1)


def confirmed(folder: Path) -> None:
    """The confirmation runs of the sweep's finalists on fold 2: c1 and c2 recorded, c3 interrupted at epoch 3."""
    record(folder, "c1", 4, stage="confirm", fold=2)
    record(folder, "c2", 4, stage="confirm", fold=2)
    checkpoint(folder, "c3", 3)


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
    saved = pickle.dumps(GatedASHA(CONFIG, GATE, curves=Curves(finished)))
    resumed = pickle.loads(saved)
    for trial_id in finished:  # Tune re-adds the finished trials first
        resumed.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
    assert resumed.rungs() == straight.rungs()
    assert resumed.rungs()[2] == {"good": 1.4, "flat": 2.6, "diverged": 1.7}
    assert run(resumed, "poor") == run(straight, "poor") == [TrialScheduler.CONTINUE] * 2 + [TrialScheduler.STOP]


def test_an_extension_starts_from_the_search_trials_rungs_and_decides_as_one_uninterrupted_scheduler(tmp_path):
    straight = GatedASHA(CONFIG, GATE)
    decisions = {trial_id: run(straight, trial_id) for trial_id in SWEEP}
    assert [len(d) for d in decisions.values()] == [5, 3, 5, 3, 5, 3]  # t2, t4 and t6 stopped at rung 2
    first = GatedASHA(CONFIG, GATE, curves=sweep_curves(tmp_path))  # the sweep's first experiment, `tune/`
    for trial_id in ("t1", "t2", "t3"):
        assert run(first, trial_id) == decisions[trial_id]
        record(tmp_path, trial_id, len(decisions[trial_id]) - 1)
    confirmed(tmp_path)  # the search ended: its finalists confirmed, and then `resume --trials 6`
    extension = GatedASHA(CONFIG, GATE, curves=sweep_curves(tmp_path))  # `tune-to-6/`, a new experiment
    assert [run(extension, t) for t in ("t4", "t5", "t6")] == [decisions[t] for t in ("t4", "t5", "t6")]
    assert extension.rungs() == straight.rungs()


def test_a_restored_extension_places_its_running_trial_and_decides_as_one_uninterrupted_scheduler(tmp_path):
    straight = GatedASHA(CONFIG, GATE)
    decisions = {trial_id: run(straight, trial_id) for trial_id in SWEEP}
    for trial_id in ("t1", "t2", "t3"):  # the first experiment's trials
        record(tmp_path, trial_id, len(decisions[trial_id]) - 1)
    confirmed(tmp_path)
    extension = GatedASHA(CONFIG, GATE, curves=sweep_curves(tmp_path))
    saved = pickle.dumps(extension)  # Tune saves it as the extension starts
    assert run(extension, "t4") == decisions["t4"]
    record(tmp_path, "t4", len(decisions["t4"]) - 1)
    extension.on_trial_add(None, SimpleNamespace(trial_id="t5"))
    assert report(extension, "t5", range(4)) == decisions["t5"][:4]
    checkpoint(tmp_path, "t5", 3)  # and the sweep is interrupted
    restored = pickle.loads(saved)  # `resume` restores the extension's experiment
    for trial_id in ("t4", "t5"):  # Tune re-adds its trials before any reports
        restored.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
    assert restored.rungs() == extension.rungs()
    assert report(restored, "t5", range(4, 5)) == decisions["t5"][4:]
    restored.on_trial_complete(None, SimpleNamespace(trial_id="t5"), result(CURVES["t5"], 4))
    assert run(restored, "t6") == decisions["t6"]
    assert restored.rungs() == straight.rungs()


def test_a_scheduler_resumed_without_curves_starts_with_empty_rungs():
    resumed = pickle.loads(pickle.dumps(GatedASHA(CONFIG, GATE)))  # and one an older version pickled lacks them
    older = GatedASHA.__new__(GatedASHA)
    older.__setstate__({k: v for k, v in resumed.__dict__.items() if k not in ("curves", "rebuilt", "replaying")})
    older.on_trial_add(None, SimpleNamespace(trial_id="poor"))
    assert older.rungs() == {2: {}, 4: {}} and older.curves is None
    assert run(older, "good")[:2] == [TrialScheduler.CONTINUE] * 2
