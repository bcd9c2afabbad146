"""Warm starts (tuning/sweep/warm_start.py): another sweep's trials and winner in a new study, built from records
written here (a manifest, a ledger, an Optuna study), no sweep run."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from types import SimpleNamespace

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from tests.tuning.sweeps import space_values
from tuning.errors import UsageError
from tuning.search.curves import RecordedCurve
from tuning.search.gate import GateConfig
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.searcher import optuna_space
from tuning.search.space import SchedulerConfig, parse_space
from tuning.sweep.manifest import SweepManifest
from tuning.sweep.trial_files import SweepCurves
from tuning.sweep.warm_start import FROM, WINNER, apply, plan, read_source, require_overlap, warm_curves
from tuning.sweep_files import LEDGER, MANIFEST, STUDY

SHA = "a" * 64
IDENTITY = {"target": "volatility", "horizon": 4, "split_bar": 1000, "residual_to": "none", "leverage_lookbacks": []}
WINNER_PARAMS = {"learning_rate": 3e-3, "weight_decay": 1e-2, "batch_size": 64}
# (params, state, intermediate values by epoch, stop reason): the other sweep's study
TRIALS = [(WINNER_PARAMS, TrialState.COMPLETE, {1: 0.6, 2: 0.5, 3: 0.45, 4: 0.44}, "completed"),
          ({"learning_rate": 1e-7, "weight_decay": 1e-2, "batch_size": 64}, TrialState.PRUNED, {1: 1.0, 2: 1.0}, "gate"),
          ({"learning_rate": 1e-3, "weight_decay": 1e-4, "batch_size": 128}, TrialState.PRUNED, {1: 0.8, 2: 0.7},
           "asha"),
          ({"learning_rate": 5e-3, "weight_decay": 1e-3, "batch_size": 128}, TrialState.FAIL, {}, "nan")]


def other_sweep(storage, name="old", values=None, sha=SHA):
    """A finished sweep `name` in `storage`: its manifest, its ledger (the winner completed) and its study."""
    values = values or space_values()
    folder = storage / name
    folder.mkdir(parents=True)
    manifest = SweepManifest.new(name, storage / "bars.parquet", values, 4, str(storage), "sqlite:///m.db",
                                 IDENTITY, None, bars={"sha256": sha, "rows": 1500})
    (folder / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    records = [TrialRecord(f"t{i}", params, reason, max(steps, default=0), min(steps.values(), default=float("inf")),
                           max(steps, default=0), 1.0, 0.5, 1.0, baseline_har=0.5)
               for i, (params, _, steps, reason) in enumerate(TRIALS)]
    (folder / LEDGER).write_text(json.dumps([asdict(r) for r in records]))
    space = parse_space(values, "old.yaml")
    distributions = optuna_space(space)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{folder / STUDY}")
    for i, (params, state, steps, reason) in enumerate(TRIALS):
        study.add_trial(optuna.trial.create_trial(
            params={k: params[k] for k in distributions}, distributions=distributions, state=state,
            value=min(steps.values()) if state == TrialState.COMPLETE else None, intermediate_values=steps,
            user_attrs={"stop_reason": reason, "ray_trial_id": f"t{i}"}))
    return read_source(name, str(storage))


def new_space(search=None):
    """SPACE, or SPACE searching `search` alone (no initial points; a searched model setting not fixed)."""
    values = space_values()
    if search is not None:
        values.update(search=search, initial=[])
        values["run"]["model"] = {k: v for k, v in values["run"]["model"].items() if f"model.{k}" not in search}
    return parse_space(values, "new.yaml")


def added(tmp_path, warm):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    apply(warm, url, "new")
    return optuna.load_study(study_name="new", storage=url), url


def test_on_the_same_bars_its_completed_and_pruned_trials_join_the_study_with_their_intermediate_values(tmp_path):
    source = other_sweep(tmp_path / "sweeps")
    warm = plan(source, new_space(), SHA, IDENTITY)
    study, _ = added(tmp_path, warm)
    held = [t for t in study.trials if t.state != TrialState.WAITING]
    assert [(t.state, t.params, t.intermediate_values) for t in held] == [
        (state, params, steps) for params, state, steps, _ in TRIALS[:3]]  # the failed one is no prior knowledge
    assert held[0].value == pytest.approx(0.44)
    assert {t.user_attrs[FROM] for t in held} == {"old"}
    assert [t.user_attrs["stop_reason"] for t in held] == ["completed", "gate", "asha"]
    assert warm.lines() == ["warm start from sweep old: 3 of its trials added to the study; its winner (trial t0) "
                            "is the first trial"]


def test_its_winner_is_the_first_trial_before_the_spaces_own_initial_points(tmp_path):
    space = new_space()
    study, _ = added(tmp_path, plan(other_sweep(tmp_path / "sweeps"), space, SHA, IDENTITY))
    for point in space.initial:  # as Ray Tune's OptunaSearch enqueues them, once it opens the study
        study.enqueue_trial(dict(point))
    first = study.ask(optuna_space(space))
    assert first.params == WINNER_PARAMS
    assert first.user_attrs[WINNER] == "t0"
    assert study.ask(optuna_space(space)).params == dict(space.initial[0])


def test_a_space_with_no_searched_setting_in_common_is_refused_in_one_line(tmp_path):
    source = other_sweep(tmp_path / "sweeps")
    disjoint = new_space(search={"model.d_model": {"choices": [16, 32]}})
    with pytest.raises(UsageError) as refused:
        require_overlap(source, disjoint)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("--warm-start old: it searched train.lr, train.weight_decay, "
                                         "train.batch_size and this space searches model.d_model: no setting in common")


def test_a_sweep_that_does_not_exist_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / "sweeps").mkdir()
    with pytest.raises(UsageError, match=r"^--warm-start nope: no sweep named 'nope' in .*sweeps") as refused:
        read_source("nope", str(tmp_path / "sweeps"))
    assert "\n" not in str(refused.value)
    assert list((tmp_path / "sweeps").iterdir()) == []


def test_on_other_bars_only_the_winner_is_enqueued_and_the_sweep_says_so(tmp_path):
    warm = plan(other_sweep(tmp_path / "sweeps"), new_space(), "b" * 64, IDENTITY)
    study, _ = added(tmp_path, warm)
    assert [(t.state, t.params) for t in study.trials] == [(TrialState.WAITING, {})]  # enqueued: params when asked
    assert study.ask(optuna_space(new_space())).params == WINNER_PARAMS
    (line,) = warm.lines()
    assert line.startswith("warm start from sweep old: it ran on other bars (SHA-256 aaaaaaaaaaaa, these bbbbbbbbbbbb)"
                           ", so only its winner's configuration is enqueued, none of its trials;")


def test_another_horizon_on_the_same_bars_is_another_loss_only_the_winner_is_enqueued(tmp_path):
    warm = plan(other_sweep(tmp_path / "sweeps"), new_space(), SHA, {**IDENTITY, "horizon": 8})
    assert warm.trials == () and warm.winner_point == WINNER_PARAMS
    assert "another validation loss (horizon 4, here 8)" in warm.lines()[0]


def test_a_setting_the_new_space_does_not_search_is_dropped_and_named_once(tmp_path):
    space = new_space(search={"learning_rate": {"low": 1e-7, "high": 1e-2, "log": True},
                              "batch_size": {"choices": [64, 128]}})
    warm = plan(other_sweep(tmp_path / "sweeps"), space, SHA, IDENTITY)
    assert warm.dropped == ("train.weight_decay",)
    assert [t.params for t in warm.trials] == [{k: p[k] for k in ("learning_rate", "batch_size")}
                                               for p, *_ in TRIALS[:3]]
    assert sum("train.weight_decay" in line for line in warm.lines()) == 1


def test_a_trial_outside_the_new_range_is_left_out_and_counted(tmp_path):
    space = new_space(search={"learning_rate": {"low": 1e-5, "high": 1e-2, "log": True},
                              "batch_size": {"choices": [64, 128]}})
    warm = plan(other_sweep(tmp_path / "sweeps"), space, SHA, IDENTITY)
    assert (len(warm.trials), warm.outside) == (2, 1)  # learning rate 1e-7 lies below 1e-5
    assert "2 of its trials added to the study (1 left out: a value outside this space)" in warm.lines()[0]


def test_a_setting_the_other_fixed_takes_its_fixed_value_in_the_new_space(tmp_path):
    space = new_space(search={"learning_rate": {"low": 1e-7, "high": 1e-2, "log": True},
                              "model.d_model": {"choices": [8, 16, 32]}})
    warm = plan(other_sweep(tmp_path / "sweeps"), space, SHA, IDENTITY)
    assert {t.params["model.d_model"] for t in warm.trials} == {16}  # the other's model.d_model, fixed at 16
    assert warm.winner_point == {"learning_rate": 3e-3, "model.d_model": 16}
    assert isinstance(warm.trials[0].distributions["learning_rate"], FloatDistribution)


def test_adding_again_adds_nothing_so_a_resumed_sweep_keeps_one_copy(tmp_path):
    warm = plan(other_sweep(tmp_path / "sweeps"), new_space(), SHA, IDENTITY)
    study, url = added(tmp_path, warm)
    before = len(study.trials)
    assert apply(warm, url, "new") == 0
    assert len(optuna.load_study(study_name="new", storage=url).trials) == before == 4


def test_the_manifest_keeps_where_the_sweep_was_warm_started_from(tmp_path):
    warm = plan(other_sweep(tmp_path / "sweeps"), new_space(), SHA, IDENTITY)
    manifest = SweepManifest.new("new", tmp_path / "bars.parquet", space_values(), 5, str(tmp_path), "sqlite:///m.db",
                                 IDENTITY, None)
    assert "warm_start" not in manifest.to_dict()
    kept = SweepManifest.from_dict(json.loads(json.dumps({**manifest.to_dict(), "warm_start": warm.to_dict()})))
    assert kept.warm_start == {"sweep": "old", "storage": str(tmp_path / "sweeps"), "trials_added": 3, "winner": "t0"}


def test_trials_the_other_took_from_its_own_warm_start_are_not_taken_again_those_it_ran_are(tmp_path):
    source = other_sweep(tmp_path / "sweeps")
    study = optuna.load_study(study_name="old", storage=source.study_url)
    distributions = optuna_space(new_space())
    for attrs in ({FROM: "older", "warm_start_trial": "x"}, {FROM: "older", WINNER: "y", "stop_reason": "completed"}):
        study.add_trial(optuna.trial.create_trial(params=WINNER_PARAMS, distributions=distributions, value=0.3,
                                                  intermediate_values={1: 0.3}, user_attrs=attrs))
    warm = plan(read_source("old", str(tmp_path / "sweeps")), new_space(), SHA, IDENTITY)  # read with them
    # the winner of older that old ran is old's own trial (0.3); the one old took from older is older's, not old's
    assert [t.value for t in warm.trials] == [pytest.approx(0.44), None, None, pytest.approx(0.3)]


def test_a_winners_value_outside_the_new_range_is_left_to_the_sampler_and_said(tmp_path):
    space = new_space(search={"learning_rate": {"low": 1e-5, "high": 1e-3, "log": True},
                              "batch_size": {"choices": [64, 128]}})
    warm = plan(other_sweep(tmp_path / "sweeps"), space, SHA, IDENTITY)
    assert warm.winner_point == {"batch_size": 64}  # its learning rate, 3e-3, lies above 1e-3
    assert "warm start: its winner's train.lr lies outside this space: the sampler picks it" in warm.lines()


def test_on_other_bars_a_setting_the_new_space_does_not_search_is_dropped_from_its_winner(tmp_path):
    space = new_space(search={"learning_rate": {"low": 1e-7, "high": 1e-2, "log": True},
                              "batch_size": {"choices": [64, 128]}})
    warm = plan(other_sweep(tmp_path / "sweeps"), space, "b" * 64, IDENTITY)
    assert warm.trials == ()
    assert "warm start: train.weight_decay searched by old and not here: dropped from its winner" in warm.lines()


def test_a_study_that_cannot_be_read_is_refused_in_one_line_when_the_other_sweep_is_read(tmp_path):
    other_sweep(tmp_path / "sweeps")
    (tmp_path / "sweeps" / "old" / STUDY).write_bytes(b"not a database" * 100)
    with pytest.raises(UsageError, match=r"^--warm-start old: its Optuna study \(sqlite:///.*\) cannot be read") \
            as refused:
        read_source("old", str(tmp_path / "sweeps"))
    assert "\n" not in str(refused.value)


OWN = TrialRecord("3fa2c_00000", WINNER_PARAMS, "completed", 4, 0.4, 4, 1.0, 0.5, 1.0,
                  val_curve=(1.0, 0.7, 0.55, 0.45, 0.4), baseline_har=0.5)  # the new sweep's own first trial


def warm_started(tmp_path, sha=SHA, space=None):
    """The new sweep `new` warm-started from `old` as `sweep` leaves it: its study holding what the warm start added,
    its manifest saying so; its ledger holding one trial of its own."""
    source = other_sweep(tmp_path / "sweeps")
    warm = plan(source, space or new_space(), sha, IDENTITY)
    folder = tmp_path / "sweeps" / "new"
    folder.mkdir()
    apply(warm, f"sqlite:///{folder / STUDY}", "new")
    manifest = SweepManifest.new("new", tmp_path / "bars.parquet", space_values(), 5, str(tmp_path / "sweeps"),
                                 "sqlite:///m.db", IDENTITY, None, bars={"sha256": sha, "rows": 1500})
    manifest = dataclasses.replace(manifest, warm_start=warm.to_dict())
    (folder / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    Ledger(folder / LEDGER).add(OWN)
    return folder


def test_the_stopping_rule_of_a_warm_started_sweep_has_the_added_trials_in_its_rungs_its_records_do_not(tmp_path):
    from tuning.search.schedulers.asha import GatedASHA

    folder = warm_started(tmp_path)
    curves = SweepCurves(folder / LEDGER, str(tmp_path / "sweeps"), str(folder / "train"))
    recorded = curves.recorded()
    warm = {k: v for k, v in recorded.items() if k != OWN.trial_id}
    assert sorted(warm) == ["warm-start:old:0", "warm-start:old:1", "warm-start:old:2"]  # no Ray id has a colon
    first = warm["warm-start:old:0"]  # the winner's intermediate values (best val_loss so far), by epoch
    assert first.last_epoch == 4 and [first.best_until(e) for e in range(5)] == [None, 0.6, 0.5, 0.45, 0.44]
    assert (warm["warm-start:old:1"].last_epoch, warm["warm-start:old:1"].best_until(2)) == (2, 1.0)
    scheduler = GatedASHA(SchedulerConfig(max_epochs=4, grace_period=2, reduction_factor=2),
                          GateConfig(epoch=2, ratio_to_e0=0.9), curves)
    scheduler.on_trial_add(None, SimpleNamespace(trial_id="3fa2c_00001"))  # the rebuild, at the first trial added
    assert scheduler.rungs() == {4: {OWN.trial_id: 0.4, "warm-start:old:0": 0.44},
                                 2: {OWN.trial_id: 0.55, "warm-start:old:0": 0.5, "warm-start:old:1": 1.0,
                                     "warm-start:old:2": 0.7}}
    assert list(Ledger(folder / LEDGER).records) == [OWN.trial_id]  # so not in the leaderboard, finalists, winner


def test_a_sweep_warm_started_on_other_bars_or_not_at_all_gives_the_rule_its_own_trials_alone(tmp_path):
    folder = warm_started(tmp_path, sha="b" * 64)  # only the winner enqueued: nothing added
    assert warm_curves(folder) == {}
    assert SweepCurves(folder / LEDGER, str(tmp_path), str(folder / "train")).recorded() == {
        OWN.trial_id: RecordedCurve(OWN.val_curve, 4)}
    assert warm_curves(tmp_path / "no-sweep") == {}


def test_trials_that_ran_another_schedule_are_for_the_sampler_alone_and_said(tmp_path):
    values = space_values()
    values["scheduler"] = {**values["scheduler"], "max_epochs": 6}  # the other's ran 4: other learning rates by epoch
    folder = warm_started(tmp_path, space=parse_space(values, "new.yaml"))
    kept = json.loads((folder / MANIFEST).read_text())["warm_start"]
    assert (kept["trials_added"], kept["stopping_rule"]) == (3, False)
    assert warm_curves(folder) == {}
    warm = plan(read_source("old", str(tmp_path / "sweeps")), parse_space(values, "new.yaml"), SHA, IDENTITY)
    assert ("warm start: its trials ran a 4-epoch schedule (warmup and cosine), this sweep's is 6: the sampler sees "
            "them, the stopping rule compares this sweep's own trials only") in warm.lines()
