"""Every bad input a user can give `mamba-tune sweep`, `resume` and `best`: one line, exit 2, nothing written.

Each case runs the real CLI in its own process, as a user would, and checks the message (what,
the rule, the fix), the exit code, that no traceback is printed, and that the sweep's storage
was not created (the errors come before Ray starts).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.cli import assert_one_line_error, run_cli
from tests.model.test_bars import bar_columns, write_bars
from tests.tuning.sweeps import SPACE, write_space

ROW = 7


def _truncated(path):
    write_bars(path)
    path.write_bytes(path.read_bytes()[:-100])


def _empty(path):
    pq.write_table(pa.table({k: pa.array(v[:0]) for k, v in bar_columns().items()}), path)


def _without_high(path):  # volume may be missing (bars without it have no volume_change): a price may not
    columns = bar_columns()
    del columns["high"]
    write_bars(path, columns)


def _text_prices(path):
    columns = bar_columns()
    columns["high"] = columns["high"].astype(str)
    write_bars(path, columns)


def _unsorted(path):
    columns = bar_columns()
    columns["timestamp"][[ROW, ROW + 1]] = columns["timestamp"][[ROW + 1, ROW]]
    write_bars(path, columns)


def _duplicate(path):
    columns = bar_columns()
    columns["timestamp"][ROW] = columns["timestamp"][ROW - 1]
    write_bars(path, columns)


def _few(path):
    write_bars(path, bar_columns(n=30))


def _high_below_low(path):
    columns = bar_columns()
    columns["high"][ROW] = columns["low"][ROW] - 0.25
    write_bars(path, columns)


def _set(name, value):
    def write(path):
        columns = bar_columns()
        columns[name] = columns[name].astype(np.float64)
        columns[name][ROW] = value
        write_bars(path, columns)
    return write


DATA = {
    "missing file": (None, "--data {path}: no such file; make one with `mamba-tune data synth"),
    "not parquet": (lambda p: p.write_text("timestamp,open\n1,2\n"), "{path}: not a Parquet file, or a truncated one"),
    "truncated parquet": (_truncated, "{path}: not a Parquet file, or a truncated one"),
    "empty": (_empty, "{path}: the file has no rows, bars are needed"),
    "missing column": (_without_high, "{path}: column 'high' (high) is missing, the file has timestamp"),
    "mistyped column": (_text_prices, "{path}: column 'high' (high) has type string, it must be numeric"),
    "NaN": (_set("close", float("nan")), f"{{path}}: column 'close' at row {ROW} is NaN or infinite"),
    "inf": (_set("volume", float("inf")), f"{{path}}: column 'volume' at row {ROW} is NaN or infinite"),
    "duplicate timestamps": (_duplicate, f"{{path}}: column 'timestamp' at row {ROW} "),
    "unsorted timestamps": (_unsorted, f"{{path}}: column 'timestamp' at row {ROW + 1} is earlier than the previous"),
    "too few bars": (_few, "{path}: 30 bars are too few, window 16 + horizon 4 + at least"),
    "high below low": (_high_below_low, f"{{path}}: column 'high' at row {ROW} is below low, high must be >= low"),
}


@pytest.mark.parametrize("case", DATA)
def test_bad_data_is_one_line_exit_2_and_writes_nothing(case, tmp_path):
    write, message = DATA[case]
    path = tmp_path / "bars.parquet"
    if write is not None:
        write(path)
    done = run_cli("sweep", "--data", path, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
               timeout=120)
    assert_one_line_error(done, message.format(path=path))
    assert not (tmp_path / "sweeps").exists()


SPACES = {
    "yaml syntax": ("name: t\nsearch: [unclosed\n", r"invalid YAML"),
    "unknown key": ({"trails": 8}, "unknown key 'trails' in the top level; did you mean trials"),
    "bad bounds": ({"search": {**SPACE["search"], "learning_rate": {"low": 0.1, "high": 0.01, "log": True}}},
                   "search.learning_rate: low 0.1 must be below high 0.01"),
    "bad choice list": ({"search": {**SPACE["search"], "batch_size": {"choices": [64, "big"]}}},
                        "search.batch_size.choices must be int values (train.batch_size), got [64, 'big']"),
    "empty choice list": ({"search": {**SPACE["search"], "batch_size": {"choices": []}}},
                          "search.batch_size.choices must be a non-empty list"),
    "gate beyond max epochs": ({"gate": {"epoch": 9, "ratio_to_e0": 0.9}},
                               "gate.epoch 9 is beyond scheduler.max_epochs 4, the gate would never be reached"),
    "an objective the target does not take": (
        {"run": {**SPACE["run"], "data": {**SPACE["run"]["data"], "target": "return", "objective": "qlike"}}},
        "data.objective qlike: QLIKE ranks variance forecasts, and target return is not one; use mse or target "
        "volatility"),
    "the objective searched": ({"search": {**SPACE["search"], "data.objective": {"choices": ["mse_log", "qlike"]}}},
                               "data.objective cannot be searched: runs of different objectives have losses in "
                               "different units"),
    "a setting another stopping rule takes": (
        {"scheduler": {"kind": "median", "max_epochs": 4, "grace_period": 2, "reduction_factor": 2}},
        "scheduler.reduction_factor is set, and scheduler.kind median does not take it (only asha, hyperband do); "
        "remove it, or --set scheduler.reduction_factor=null"),
}


SEGMENTS_AND_CONFIRMATION = {  # each refused before Ray starts, naming the bar count needed where it applies
    "top_k above the trials": ({"confirm": {"top_k": 6}}, [],
                               "{space}: confirm.top_k 6 is more than the 5 trials of the search"),
    "top_k above --trials": ({"confirm": {"top_k": 2}}, ["--trials", "1"],
                             "{space} (with --trials 1): confirm.top_k 2 is more than the 1 trials of the search"),
    "repeated seeds": ({"confirm": {"top_k": 1, "seeds": [3, 3]}}, [],
                       "{space}: confirm: seeds must differ from each other, 3 is given twice"),
    "the base seed": ({"confirm": {"top_k": 1, "seeds": [0, 1]}}, [],
                      "{space}: confirm.seeds holds 0, the run's own seed (train.seed)"),
    "folds past the first bar": ({"confirm": {"top_k": 1, "folds": 5}}, [],
                                 "{bars}: walk-forward fold 5 (confirm.folds) would start before the first bar"),
    "folds with too few bars": ({"confirm": {"top_k": 1, "folds": 3}, "run": {
        **SPACE["run"], "data": {**SPACE["run"]["data"], "val_fraction": 0.298}}}, [],
        "{bars}: 1,500 bars are too few, window 16 + horizon 4 + at least 32 samples in the validation and test "
        "segments need "),
    "a test segment too small": ({"run": {**SPACE["run"], "data": {**SPACE["run"]["data"], "test_fraction": 0.02}}},
                                 [], "{bars}: 1,500 bars are too few, window 16 + horizon 4 + at least 32 samples in "
                                     "the validation and test segments need "),
}


@pytest.mark.parametrize("case", SEGMENTS_AND_CONFIRMATION)
def test_bad_segments_or_confirmation_are_one_line_exit_2_and_write_nothing(case, bars, tmp_path):
    change, flags, message = SEGMENTS_AND_CONFIRMATION[case]
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({**json.loads(json.dumps(SPACE)), **change}))
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps", *flags, timeout=120)
    assert_one_line_error(done, message.format(space=space, bars=bars))
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("case", SPACES)
def test_bad_search_space_is_one_line_exit_2_and_writes_nothing(case, bars, tmp_path):
    change, message = SPACES[case]
    space = tmp_path / "space.yaml"
    if isinstance(change, str):
        space.write_text(change)
    else:
        space.write_text(yaml.safe_dump({**json.loads(json.dumps(SPACE)), **change}))
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps", timeout=120)
    assert_one_line_error(done, f"{space}: ")
    assert message in done.stderr and not (tmp_path / "sweeps").exists()


def test_resume_and_best_of_an_unknown_sweep_are_one_line_exit_2(tmp_path):
    for command in ("resume", "best"):
        done = run_cli(command, "nope", "--storage", tmp_path / "sweeps", timeout=120)
        assert_one_line_error(done, "no sweep named 'nope' in ")


def test_a_warm_start_from_a_sweep_that_does_not_exist_is_one_line_exit_2_and_writes_nothing(bars, tmp_path):
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "sweeps",
                   "--warm-start", "nope", timeout=120)
    assert_one_line_error(done, "--warm-start nope: no sweep named 'nope' in ")
    assert not (tmp_path / "sweeps" / "t").exists()


def test_best_before_any_trial_finished_is_one_line_exit_2(bars, tmp_path):
    """A sweep stopped before its first trial ended: its folder has the manifest and no ledger yet."""
    from model.data import load_dataset
    from tuning.search.space import load_space
    from tuning.sweep.session import write_manifest
    from tuning.sweep_files import sweep_paths

    space_file = write_space(tmp_path)
    space = load_space(space_file)
    paths = sweep_paths(str(tmp_path / "sweeps"), "t")
    paths.folder.mkdir(parents=True)
    write_manifest(paths, bars, yaml.safe_load(space_file.read_text()), 5, load_dataset(bars, space.run.data),
                   "sqlite:///unused.db")
    done = run_cli("best", "t", "--storage", tmp_path / "sweeps", timeout=120)
    assert_one_line_error(done, "sweep 't' has no completed trial yet (0 finished, none ran all 4 epochs); resume it")
    assert sorted(p.name for p in paths.folder.iterdir()) == ["sweep.json"]  # no best.yaml written
