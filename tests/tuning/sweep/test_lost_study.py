"""A sweep whose Optuna study was SQLite on its head is refused by `resume` on a head that lacks that file, in one
line, before Ray starts: Ray Tune's saved searcher would report to trials no study holds, and the resumed sweep
would crash after its first epoch ('Record does not exist'). The records come back from the storage's copy (a
file:// URI stands for the bucket) into another machine's folder, or into this very folder on a new volume at the
same path: a Kubernetes head pod replaced with its volume lost, whose folders.json names no earlier folder."""

from __future__ import annotations

import json

import pytest

from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import space_values
from tuning.sweep.manifest import SweepManifest
from tuning.sweep_files import MANIFEST, TUNE_DIR


@pytest.mark.parametrize("moved", [False, True], ids=["same-folder-new-volume", "another-machine"])
def test_resume_refuses_a_sweep_whose_sqlite_study_stayed_on_the_lost_head(moved, tmp_path):
    bucket, head = tmp_path / "bucket" / "sweeps", tmp_path / "head"
    storage = f"file://{bucket}"
    folder = head / "runs" / "sweeps" / "t"  # where `resume` in `head` keeps sweep t of a URI storage
    ran_in = tmp_path / "lost-head" / "runs" / "sweeps" / "t" if moved else folder
    manifest = SweepManifest.new("t", tmp_path / "bars.parquet", space_values(trials=2), 2, storage, None,
                                 {"residual_to": "none", "leverage_lookbacks": []}, None)
    copy = bucket / "t"
    (copy / TUNE_DIR).mkdir(parents=True)
    (copy / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    (copy / "folders.json").write_text(json.dumps([str(ran_in)]))
    (copy / TUNE_DIR / "experiment_state.json").write_text("{}")  # Ray Tune saved the sweep, its searcher with it
    head.mkdir()

    done = run_cli("resume", "t", "--storage", storage, cwd=head)
    assert_one_line_error(done, f"sweep 't''s Optuna study is SQLite in {ran_in / 'optuna.db'}, on the machine (or "
                                f"the volume) that ran it last, and not here; resume it there (or copy that file to "
                                f"{folder}), and give sweeps that must outlive their head --study-url "
                                "postgresql://HOST/DB")
    assert not (folder / "optuna.db").exists()  # no empty study made in its place
