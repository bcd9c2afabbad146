"""The inputs line `train` and `sweep` print: the features per bar and, for bars without volume, the ones left out.
The sweep's header is printed by a sweep whose session stops at once (no Ray, no trial)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from model.data import DataConfig, load_dataset
from model.features import VOLUME_FEATURES, feature_names
from model.synth import synth_bars
from tuning.cli import sweep
from tuning.cli.data_common import inputs_line
from tuning.search.shipped_spaces import space_path
from tuning.search.space import load_space
from tuning.sweep_files import sweep_paths

NO_VOLUME = "(the bars have no volume: volume_change left out)"


def test_inputs_line_names_the_volume_features_left_out():
    with_volume = feature_names((1, 6), True, (1,), volume=True)
    without = feature_names((1, 6), True, (1,), volume=False)
    assert inputs_line(len(with_volume), with_volume) == f"inputs: {len(with_volume)} features per bar"
    assert inputs_line(len(without), without) == f"inputs: {len(without)} features per bar {NO_VOLUME}"
    assert VOLUME_FEATURES == ("volume_change",)  # the words above name them


class Stopped(Exception):
    """The fake session's stop, once the header is printed."""


def test_the_sweeps_header_says_the_bars_have_no_volume(tmp_path, capsys):
    path = tmp_path / "fx.parquet"
    pq.write_table(synth_bars(800, seed=0).drop_columns(["volume"]), path)
    space = load_space(space_path("smoke"))
    data = load_dataset(path, DataConfig(window=32, horizon=6))
    session = SimpleNamespace(open_tracking=lambda *args: (_ for _ in ()).throw(Stopped()))
    plan = SimpleNamespace(describe=lambda: "1 trial(s) at once", concurrency=1, gpus_per_worker=0)
    store = SimpleNamespace(describe=lambda: "a store")
    manifest = SimpleNamespace(trials=2, trial_stages=None)
    with pytest.raises(Stopped):
        sweep._run_sweep(session, sweep_paths(str(tmp_path / "sweeps"), "fx"), space, data, manifest, plan,
                         (store, None), str(tmp_path / "sweeps"), False, "mamba-tune resume fx")
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == f"inputs: {data.n_features} features per bar {NO_VOLUME}", lines
