"""`mamba-tune list`: the sweeps of a storage folder with their state, trials, best and test loss.

A running sweep (its driver alive) and one interrupted by a kill are in tests/reliability/test_interruptions.py.
"""

from __future__ import annotations

import json
import shutil

import yaml

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import write_space
from tuning.sweep.session import write_manifest
from tuning.sweep_files import sweep_paths


def test_list_shows_each_sweep_its_state_trials_and_figures(finished_sweep, bars, tmp_path):
    from model.data import load_dataset
    from tuning.search.space import load_space

    _, storage, _, _ = finished_sweep
    shelf = tmp_path / "sweeps"
    shutil.copytree(storage / "t", shelf / "t")  # the session's finished sweep
    space_file = write_space(tmp_path)  # a sweep stopped before its first trial ended: a manifest, no ledger
    paths = sweep_paths(str(shelf), "early")
    paths.folder.mkdir(parents=True)
    write_manifest(paths, bars, yaml.safe_load(space_file.read_text()), 5,
                   load_dataset(bars, load_space(space_file).run.data), "sqlite:///unused.db")
    (shelf / "broken").mkdir()
    (shelf / "broken" / "sweep.json").write_text("{not json")
    (shelf / "driver-gone").mkdir()  # not a sweep: ignored

    done = run_cli("list", "--storage", shelf)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["name", "state", "trials", "best", "val", "test", "started", "(UTC)"]
    look = json.loads((shelf / "t" / "test.json").read_text())
    ledger = json.loads((shelf / "t" / "trials.json").read_text())
    winner = next(r for r in ledger if r["trial_id"] == look["trial_id"])
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["t"][1:5] == ["finished", "5/5", f"{winner['best_val_loss']:.4f}", f"{look['test_loss']:.4f}"]
    assert rows["early"][1:5] == ["interrupted", "0/5", "-", "-"]
    assert rows["broken"][1] == "unreadable" and len(rows) == 3


def test_list_of_an_empty_or_missing_storage(tmp_path):
    done = run_cli("list", "--storage", tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(f"no sweeps in {tmp_path}; start one with")
    assert_one_line_error(run_cli("list", "--storage", tmp_path / "nope"), f"--storage {tmp_path / 'nope'}: no such "
                          "folder; pass the --storage the sweeps were started with")
