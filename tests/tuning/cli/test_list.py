"""`mamba-tune list`: the sweeps of a storage folder with their state, trials, best and test loss.

A running sweep (its driver alive) and one interrupted by a kill are in tests/reliability/test_interruptions.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

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
    assert lines[0].split() == ["name", "state", "trials", "best", "val", "test", "objective", "started", "(UTC)"]
    look = json.loads((shelf / "t" / "test.json").read_text())[-1]
    ledger = json.loads((shelf / "t" / "trials.json").read_text())
    winner = next(r for r in ledger if r["trial_id"] == look["trial_id"])
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["t"][1:5] == ["finished", "5/5", f"{winner['best_val_loss']:.4f}", f"{look['test_loss']:.4f}"]
    assert rows["early"][1:5] == ["interrupted", "0/5", "-", "-"]
    assert rows["t"][5] == rows["early"][5] == "mse_log"  # the smoke space's: the volatility target's default
    assert rows["broken"][1] == "unreadable" and len(rows) == 3


def test_list_of_an_empty_or_missing_storage(tmp_path):
    done = run_cli("list", "--storage", tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(f"no sweeps in {tmp_path}; start one with")
    assert_one_line_error(run_cli("list", "--storage", tmp_path / "nope"), f"--storage {tmp_path / 'nope'}: no such "
                          "folder; pass the --storage the sweeps were started with")


def test_list_of_a_uri_storage_shows_the_sweeps_copied_there(finished_sweep, bars, tmp_path):
    """Sweeps on s3://... keep their records in runs/sweeps/NAME on the head and a copy in the storage
    (tuning/sweep/record_copies.py): listed from the copy on another machine, from its own folder on the head."""
    from model.data import load_dataset
    from tuning.search.space import load_space
    from tuning.sweep.record_copies import copy_records

    _, storage, _, _ = finished_sweep
    uri = f"file://{tmp_path / 'bucket'}"
    head, elsewhere = tmp_path / "head", tmp_path / "elsewhere"
    lost = sweep_paths(uri, "t")
    shutil.copytree(storage / "t", head / "runs" / "sweeps" / "t")  # the session's finished sweep, on its head
    copy_records(replace(lost, folder=head / "runs" / "sweeps" / "t"))
    space_file = write_space(tmp_path)  # a sweep stopped before its first trial ended, its head lost
    early = replace(sweep_paths(uri, "early"), folder=head / "runs" / "sweeps" / "early")
    early.folder.mkdir(parents=True)
    write_manifest(early, bars, yaml.safe_load(space_file.read_text()), 5,
                   load_dataset(bars, load_space(space_file).run.data), "sqlite:///unused.db")
    copy_records(early)
    (tmp_path / "bucket" / "no sweep").mkdir()  # not a sweep: ignored
    elsewhere.mkdir()

    rows = {}
    for machine in (elsewhere, head):
        done = run_cli("list", "--storage", uri, cwd=machine)
        assert done.returncode == 0, done.stderr
        rows[machine] = {line.split()[0]: line[21:].split("  ")[0].strip() for line in done.stdout.splitlines()[1:]}
    look = json.loads((storage / "t" / "test.json").read_text())[-1]
    winner = next(r for r in json.loads((storage / "t" / "trials.json").read_text())
                  if r["trial_id"] == look["trial_id"])
    assert rows[elsewhere]["early"] == "not finished (stored)"  # another head may run it: the copy cannot tell
    assert rows[head]["early"] == "interrupted"  # its own head knows its driver is not running
    for machine in (elsewhere, head):
        line = next(line for line in run_cli("list", "--storage", uri, cwd=machine).stdout.splitlines()
                    if line.startswith("t "))
        assert line.split()[1:5] == ["finished", "5/5", f"{winner['best_val_loss']:.4f}", f"{look['test_loss']:.4f}"]
    assert sorted(rows[elsewhere]) == sorted(rows[head]) == ["early", "t"]
    assert_one_line_error(run_cli("list", "--storage", "s3://user:secret@bucket/sweeps"), "--storage ")
