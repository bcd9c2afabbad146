"""`train --look` (tuning/cli/train_look.py) keeps its look as the sweep keeps its own: a URI storage's records
fetched and a stale folder refused, a sweep being driven refused, and nothing trained before either refusal."""

from __future__ import annotations

import json

from tests.tuning.cli.test_train import winner_yaml
from tests.tuning.sweep.test_record_copies import folder_files, remote_files, resumed_elsewhere
from tuning.cli.main import main
from tuning.sweep_files import DRIVER, MANIFEST, TEST_LOOK


def test_train_look_on_a_stale_folder_of_a_uri_storage_is_refused_naming_both_generations(tmp_path, monkeypatch,
                                                                                          capsys):
    storage = f"file://{tmp_path / 'bucket'}"
    stale, latest = resumed_elsewhere(tmp_path, storage)  # head a's folder is generation 1, the copy generation 2
    there, here = remote_files(storage), folder_files(stale.folder)
    monkeypatch.chdir(tmp_path / "a")  # runs/sweeps/k here is a's folder
    out = tmp_path / "out"

    assert main(["train", "--data", str(tmp_path / "bars.parquet"), "--config", str(winner_yaml(tmp_path, sweep="k")),
                 "--out", str(out), "--look", "--storage", storage]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: sweep 'k''s records in {stale.folder} are generation 1, and its copy in {storage}/k is a "
                   f"newer generation 2 (copied from {latest.folder}); a stale folder never replaces newer records: "
                   f"move {stale.folder} aside and run the command again, which fetches the newer copy\n"), err
    assert remote_files(storage) == there and folder_files(stale.folder) == here  # nothing written, there or here
    assert not out.exists()  # refused before anything was trained


def test_train_look_on_a_uri_storage_fetches_the_sweeps_records_where_its_folder_is_not_here(tmp_path, monkeypatch,
                                                                                          capsys):
    storage = f"file://{tmp_path / 'bucket'}"
    _, latest = resumed_elsewhere(tmp_path, storage)
    (tmp_path / "c").mkdir()
    monkeypatch.chdir(tmp_path / "c")  # a third machine: no folder of sweep k here
    here = tmp_path / "c" / "runs" / "sweeps" / "k"

    # The fetched manifest is no sweep's ('{"name": "k"}'): refused after the fetch, before any training.
    assert main(["train", "--data", str(tmp_path / "bars.parquet"), "--config", str(winner_yaml(tmp_path, sweep="k")),
                 "--out", str(tmp_path / "out"), "--look", "--storage", storage]) == 2
    assert f"and its {here / MANIFEST} is no sweep manifest" in capsys.readouterr().err
    assert (here / TEST_LOOK).read_bytes() == (latest.folder / TEST_LOOK).read_bytes()  # the newer records, fetched


def test_train_look_on_a_sweep_being_driven_is_refused_in_one_line(tmp_path, capsys):
    folder = tmp_path / "sweeps" / "t"
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text("{}")
    (folder / TEST_LOOK).write_text("[]")
    out = tmp_path / "out"
    (folder / DRIVER).write_text(json.dumps({"host": "head-0", "pid": 4242, "since": "now"}))

    assert main(["train", "--data", str(tmp_path / "bars.parquet"), "--config", str(winner_yaml(tmp_path)),
                 "--out", str(out), "--look", "--storage", str(tmp_path / "sweeps")]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --look adds a look to sweep t's test.json, and the sweep is running (pid 4242 on head-0): a "
                   "look is never added while a sweep driver may write test.json; nothing was trained: run the command "
                   "again once the sweep has ended or been stopped\n"), err
    assert not out.exists() and json.loads((folder / TEST_LOOK).read_text()) == []


def test_train_look_on_a_sweep_driven_since_training_began_keeps_the_run_and_exits_1(tmp_path, capsys):
    from argparse import Namespace

    from model.data import DataConfig, load_dataset
    from tests.bars import write_bars
    from tuning.cli.train_look import SweepLook, score_test_segment
    from tuning.sweep_files import sweep_paths

    write_bars(tmp_path / "bars.parquet", 1500, seed=3)
    data = load_dataset(tmp_path / "bars.parquet", DataConfig(window=32, horizon=6))
    paths = sweep_paths(str(tmp_path / "sweeps"), "t")
    paths.folder.mkdir(parents=True)
    (paths.folder / TEST_LOOK).write_text("[]")
    (paths.folder / DRIVER).write_text(json.dumps({"host": "head-0", "pid": 4242, "since": "now"}))  # resumed meanwhile
    args = Namespace(data=str(tmp_path / "bars.parquet"), out=tmp_path / "out", storage=str(tmp_path / "sweeps"))

    assert score_test_segment(args, None, data, 2, "t", SweepLook(paths, None)) == 1  # the run trained: no bad input
    err = capsys.readouterr().err
    assert err.startswith("error: --look adds a look to sweep t's test.json, and the sweep is running (pid 4242 on "
                          "head-0)") and f"the trained run is kept in {tmp_path / 'out'}, its look not taken" in err
    assert err.count("\n") == 1 and json.loads((paths.folder / TEST_LOOK).read_text()) == []
