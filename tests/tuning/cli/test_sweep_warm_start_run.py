"""End to end, one real tiny sweep: warm-started from a copy of the session's finished sweep (tests/conftest.py) on
the same bars, with a gate no trial can pass. Its study holds the other's trials, its first trial is the other's
winner; it ends with the no-winner answer and its exit code, its records and MLflow runs complete."""

from __future__ import annotations

import json
import re

import optuna
import pytest
from optuna.trial import TrialState

from tests.cli import run_cli
from tests.tuning.sweeps import copy_sweep, ledger, sweep_run, write_space
from tuning.search.gate_verdict import NO_WINNER, NO_WINNER_EXIT, OUTCOME_TAG
from tuning.sweep.warm_start import FROM, WINNER
from tuning.sweep_files import MANIFEST, STUDY

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.fixture(scope="module")
def warm_sweep(finished_sweep, bars, tmp_path_factory):
    """-> (storage, tracking URI, completed `sweep --name w --warm-start t`): 2 trials, the gate at epoch 2 asking for
    a thousandth of HAR's loss."""
    folder = tmp_path_factory.mktemp("warm")
    storage, uri = copy_sweep(finished_sweep, folder)
    space = write_space(folder, trials=2, initial=[], resources={"max_concurrent": 1},
                        scheduler={"max_epochs": 3, "grace_period": 2, "reduction_factor": 2},
                        gate={"epoch": 2, "ratio_to_e0": None, "ratio_to_baseline": 0.001})
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri,
                   "--name", "w", "--warm-start", "t")
    return storage, uri, done


def trials_of(storage, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{storage / name / STUDY}").trials


def test_the_warm_started_study_holds_the_others_trials_and_tries_its_winner_first(warm_sweep):
    storage, _, done = warm_sweep
    others = [t for t in trials_of(storage, "t") if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    mine = trials_of(storage, "w")
    added = [t for t in mine if FROM in t.user_attrs and WINNER not in t.user_attrs]
    assert [(t.params, t.state, t.intermediate_values) for t in added] == [
        (t.params, t.state, t.intermediate_values) for t in others]
    warm = json.loads((storage / "w" / MANIFEST).read_text())["warm_start"]
    assert warm["sweep"] == "t" and warm["trials_added"] == len(others) > 0
    (first, *rest) = [t for t in mine if FROM not in t.user_attrs or WINNER in t.user_attrs]  # its own, in order
    winner_params = ledger(storage / "t")[warm["winner"]]["params"]
    assert first.user_attrs[WINNER] == warm["winner"] and first.params == winner_params
    assert f"warm start from sweep t: {len(others)} of its trials added to the study; its winner (trial " \
           f"{warm['winner']}) is the first trial" in done.stdout
    own = ledger(storage / "w")
    assert any(r["params"] == winner_params for r in own.values())  # the trial Ray Tune ran for it


def test_a_sweep_whose_gate_nobody_passes_ends_with_the_answer_and_its_exit_code(warm_sweep):
    storage, uri, done = warm_sweep
    assert done.returncode == NO_WINNER_EXIT, done.stderr[-3000:]
    records = [r for r in ledger(storage / "w").values() if r["stage"] == "search"]
    assert len(records) == 2 and {r["stop_reason"] for r in records} == {"gate"}
    best = min(records, key=lambda r: r["val_curve"][2])
    said = re.search(r"no configuration (?:beat HAR at the gate's epoch 2: HAR's validation loss ([\d.]+), the best "
                     r"trial's ([\d.]+)|passed the gate at epoch 2: the best trial's validation loss ([\d.]+)) "
                     r"\(trial (\S+)\)", done.stdout)
    assert said, done.stdout[-3000:]
    assert said.group(4) == best["trial_id"]
    assert float(said.group(2) or said.group(3)) == pytest.approx(best["val_curve"][2], abs=1e-4)
    assert "what may change it: more bars" in done.stdout and "--set gate.ratio_to_baseline=" in done.stdout
    assert "error:" not in done.stderr
    run = sweep_run(uri, "w")
    assert run.info.status == "FINISHED"
    assert run.data.tags.get(OUTCOME_TAG) == NO_WINNER == "no winner: no trial passed the gate"
