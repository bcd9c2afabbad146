"""A sweep whose storage outlives its machine and whose Optuna study does not is warned, in one line, before it
starts (tuning/cli/sweep.py: warn_if_only_here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.cli.sweep import warn_if_only_here
from tuning.sweep_files import SweepPaths


@pytest.mark.parametrize("storage, study, warned", [
    ("s3://bucket/sweeps", None, True),
    ("s3://bucket/sweeps", "postgresql://db:5432/optuna", False),
    ("/shared/sweeps", None, False),  # the sweep folder and optuna.db are in the shared folder
])
def test_only_a_uri_storage_with_the_sqlite_study_is_warned(storage, study, warned, capsys):
    warn_if_only_here(SweepPaths("k", Path("/work/runs/sweeps/k"), storage, study))
    out, err = capsys.readouterr()
    assert out == ""
    if warned:
        assert err == ("warning: the Optuna study is SQLite in /work/runs/sweeps/k, on this machine, and --storage is "
                       "a URI: if this machine is lost, no other can resume the sweep; give --study-url "
                       "postgresql://HOST/DB for one that can\n")
    else:
        assert err == ""
