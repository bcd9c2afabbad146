"""Every scheduler.kind driven as Ray Tune drives it (no cluster): the gate in front of each rule, `none` stopping
nothing the gate lets through, and each rule's state rebuilt on a resume and an extension (`resume --trials N`) from
the recorded curves, so that it decides as one uninterrupted scheduler fed the same results."""

from __future__ import annotations

import math
import pickle
from types import SimpleNamespace

import pytest
import torch
from ray.tune.schedulers import TrialScheduler

from tests.tuning.search.test_scheduler import (
    CURVES,
    GATE,
    SWEEP,
    Curves,
    checkpoint,
    confirmed,
    record,
    report,
    result,
    run,
    sweep_curves,
)
from tuning.search.curves import RecordedCurve
from tuning.search.gate import INVALID
from tuning.search.scheduler import SCHEDULERS, GatedASHA, GatedFIFO, GatedHyperband, GatedMedian, make_scheduler
from tuning.search.scheduler_config import KINDS, SchedulerConfig
from tuning.search.schedulers.hyperband import bracket_index

# max_epochs 4 as test_scheduler's CONFIG (its ledger records say "completed" at 4); each kind with what it takes
CONFIGS = {
    "asha": SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2),
    "hyperband": SchedulerConfig(kind="hyperband", max_epochs=4, grace_period=1, reduction_factor=2, brackets=2),
    "median": SchedulerConfig(kind="median", max_epochs=4, grace_period=1, min_samples=2),
    "none": SchedulerConfig(kind="none", max_epochs=4),
}
STOPPING = ("asha", "hyperband", "median")  # the kinds with a rule, and a state to rebuild
CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP


def state(scheduler) -> object:
    """What the rule compares a trial with: ASHA's rungs, each Hyperband bracket's, the median rule's curves."""
    if isinstance(scheduler, GatedHyperband):
        return scheduler.bracket_rungs()
    if isinstance(scheduler, GatedASHA):
        return scheduler.rungs()
    if isinstance(scheduler, GatedMedian):
        return scheduler.recorded()
    return None


def as_recorded(trial_id: str, epochs: int) -> RecordedCurve:
    """The curve the ledger records of a trial that reported `epochs` epochs (a diverged one's last not in it)."""
    curve = CURVES[trial_id][:epochs]
    return RecordedCurve(tuple(v for v in curve if v == v), epochs - 1)


def straight_decisions(kind: str) -> dict[str, list[str]]:
    """The decisions one uninterrupted scheduler makes for the sweep's trials t1-t6, run one after the other."""
    straight = make_scheduler(CONFIGS[kind], GATE)
    return {trial_id: run(straight, trial_id) for trial_id in SWEEP}


def test_make_scheduler_gives_each_kind_its_rule():
    assert set(SCHEDULERS) == set(KINDS)
    expected = {"asha": GatedASHA, "hyperband": GatedHyperband, "median": GatedMedian, "none": GatedFIFO}
    assert {kind: type(make_scheduler(CONFIGS[kind], GATE)) for kind in KINDS} == expected


@pytest.mark.parametrize("kind", KINDS)
def test_the_gate_a_non_finite_loss_and_a_refused_combination_stop_a_trial_under_every_kind(kind):
    scheduler = make_scheduler(CONFIGS[kind], GATE)
    assert run(scheduler, "flat") == [CONTINUE, CONTINUE, STOP]  # val_loss 2.6 at the gate epoch 2 > 0.9 * 2.6
    assert run(scheduler, "diverged")[-1] == STOP and len(run(scheduler, "diverged")) == 4  # nan at epoch 3
    scheduler.on_trial_add(None, SimpleNamespace(trial_id="refused"))
    assert scheduler.on_trial_result(None, SimpleNamespace(trial_id="refused"), {INVALID: "headdim"}) == STOP


def test_none_never_stops_a_trial_the_gate_lets_through():
    scheduler = make_scheduler(CONFIGS["none"], GATE)
    for trial_id in ("good", *SWEEP):  # t2, t4, t6: what ASHA stops
        assert run(scheduler, trial_id) == [CONTINUE] * len(CURVES[trial_id]), trial_id
    assert {k: len(d) for k, d in straight_decisions("asha").items() if len(d) < 5} == {"t2": 3, "t4": 3, "t6": 3}


@pytest.mark.parametrize("kind", STOPPING)
def test_each_rule_stops_some_sweep_trial_and_only_with_what_it_saw_of_the_others(kind):
    """The sweep below is one where rebuilding matters: a scheduler that forgot t1-t3 decides t4-t6 otherwise."""
    decisions = straight_decisions(kind)
    assert any(d[-1] == STOP and len(d) < 5 for d in decisions.values())
    forgetful = make_scheduler(CONFIGS[kind], GATE)
    assert [run(forgetful, t) for t in ("t4", "t5", "t6")] != [decisions[t] for t in ("t4", "t5", "t6")]


@pytest.mark.parametrize("kind", KINDS)
def test_a_resumed_scheduler_rebuilds_its_state_and_stops_what_the_straight_run_stops(kind):
    straight = make_scheduler(CONFIGS[kind], GATE)
    ran = {trial_id: len(run(straight, trial_id)) for trial_id in ("t1", "flat", "t3", "diverged", "t2")}
    finished = {k: as_recorded(k, epochs) for k, epochs in ran.items()}
    # As `resume` gets it: pickled at the sweep's start, with how to read the trials' curves.
    resumed = pickle.loads(pickle.dumps(make_scheduler(CONFIGS[kind], GATE, Curves(finished))))
    for trial_id in finished:  # Tune re-adds the finished trials first
        resumed.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
        resumed.on_trial_remove(None, SimpleNamespace(trial_id=trial_id))  # and ends them: they are done
    assert state(resumed) == state(straight)
    for trial_id in ("t4", "t5", "t6", "poor"):
        assert run(resumed, trial_id) == run(straight, trial_id), trial_id


@pytest.mark.parametrize("kind", KINDS)
def test_an_extension_starts_from_the_search_trials_state_and_decides_as_one_uninterrupted_scheduler(kind, tmp_path):
    decisions = straight_decisions(kind)
    first = make_scheduler(CONFIGS[kind], GATE, sweep_curves(tmp_path))  # the sweep's first experiment, `tune/`
    for trial_id in ("t1", "t2", "t3"):
        assert run(first, trial_id) == decisions[trial_id]
        record(tmp_path, trial_id, len(decisions[trial_id]) - 1)
    confirmed(tmp_path)  # the search ended: its finalists confirmed (not counted), and then `resume --trials 6`
    extension = make_scheduler(CONFIGS[kind], GATE, sweep_curves(tmp_path))  # `tune-to-6/`, a new experiment
    assert [run(extension, t) for t in ("t4", "t5", "t6")] == [decisions[t] for t in ("t4", "t5", "t6")]


@pytest.mark.parametrize("kind", KINDS)
def test_a_restored_extension_places_its_running_trial_and_decides_as_one_uninterrupted_scheduler(kind, tmp_path):
    straight = make_scheduler(CONFIGS[kind], GATE)
    decisions = {trial_id: run(straight, trial_id) for trial_id in SWEEP}
    for trial_id in ("t1", "t2", "t3"):  # the first experiment's trials
        record(tmp_path, trial_id, len(decisions[trial_id]) - 1)
    confirmed(tmp_path)
    extension = make_scheduler(CONFIGS[kind], GATE, sweep_curves(tmp_path))
    saved = pickle.dumps(extension)  # Tune saves it as the extension starts
    assert run(extension, "t4") == decisions["t4"]
    record(tmp_path, "t4", len(decisions["t4"]) - 1)
    extension.on_trial_add(None, SimpleNamespace(trial_id="t5"))
    assert report(extension, "t5", range(4)) == decisions["t5"][:4] == [CONTINUE] * 4  # t5 runs on to the end
    checkpoint(tmp_path, "t5", 3)  # and the sweep is interrupted
    restored = pickle.loads(saved)  # `resume` restores the extension's experiment
    for trial_id in ("t4", "t5"):  # Tune re-adds its trials before any reports
        restored.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
    restored.on_trial_remove(None, SimpleNamespace(trial_id="t4"))
    assert state(restored) == state(extension)
    assert report(restored, "t5", range(4, 5)) == decisions["t5"][4:]
    restored.on_trial_complete(None, SimpleNamespace(trial_id="t5"), result(CURVES["t5"], 4))
    assert run(restored, "t6") == decisions["t6"]
    assert state(restored) == state(straight)


def test_hyperband_puts_a_trial_in_the_bracket_its_id_hashes_to_with_rays_weights():
    config = SchedulerConfig(kind="hyperband", max_epochs=50, grace_period=5, reduction_factor=3, brackets=3)
    one, other = make_scheduler(config, GATE), make_scheduler(config, GATE)
    assert [len(b._rungs) for b in one._brackets] == [3, 2, 1]  # rungs at 5, 15, 45; 15, 45; 45
    for trial_id in ("a1b2c3d4", "e5f6a7b8", "00000001"):
        one.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
        other.on_trial_add(None, SimpleNamespace(trial_id=trial_id))
        assert one._brackets.index(one._trial_info[trial_id]) == other._brackets.index(other._trial_info[trial_id])
    shares = [sum(bracket_index(f"trial_{i}", [3, 2, 1]) == b for i in range(3000)) / 3000 for b in range(3)]
    weights = torch.tensor([1.0, math.exp(-1), math.exp(-2)])  # e^(rungs - most rungs)
    torch.testing.assert_close(torch.tensor(shares), weights / weights.sum(), atol=0.03, rtol=0)


def test_hyperband_runs_the_brackets_its_config_resolved_to():
    """sp500.yaml's settings under hyperband, brackets not written: the 2 that have a rung, as describe() says."""
    config = SchedulerConfig(kind="hyperband", max_epochs=8, grace_period=2, reduction_factor=3)
    rungs = [[int(m) for m, _ in b._rungs] for b in make_scheduler(config, GATE)._brackets]
    assert sorted(map(sorted, rungs)) == [[2, 6], [6]]  # bracket 0: rungs at 2, 6; bracket 1: at 6 (18 > 8: none)
    assert config.describe() == "Hyperband (2 brackets, grace 2, reduction 3, max 8 epochs)"


def test_the_median_rule_keeps_each_epoch_once_and_compares_best_val_loss():
    scheduler = make_scheduler(CONFIGS["median"], GATE)
    run(scheduler, "t1")  # on_trial_complete repeats its last result: kept once
    scheduler.on_trial_add(None, SimpleNamespace(trial_id="t3"))
    report(scheduler, "t3", range(3))
    report(scheduler, "t3", range(1, 3))  # resumed from its epoch-0 checkpoint: epochs 1 and 2 reported anew
    assert scheduler.recorded() == {"t1": {0: 2.0, 1: 1.5, 2: 1.4, 3: 1.3, 4: 1.2}, "t3": {0: 2.0, 1: 1.4, 2: 1.3}}
