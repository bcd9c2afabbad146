"""The looks in a sweep's test.json (tuning/sweep_files.py): one way to add one, one rule for which are the sweep's."""

from __future__ import annotations

import json

from tuning.sweep_files import TEST_LOOK, TRAIN_LOOK, append_look, latest_look, read_test_looks, sweep_looks


def test_append_look_numbers_times_and_adds_the_look_never_replacing_one(tmp_path):
    first = append_look(tmp_path, {"trials": 8, "trial_id": "a", "test_loss": 0.5})
    second = append_look(tmp_path, {"by": TRAIN_LOOK, "trial_id": "a", "test_loss": 0.7})
    assert (first["look"], second["look"]) == (1, 2)
    assert list(first)[:2] == ["look", "time"] and first["time"].endswith("+00:00")
    assert json.loads((tmp_path / TEST_LOOK).read_text()) == [first, second] == read_test_looks(tmp_path)
    assert not list(tmp_path.glob("*.tmp*")) and [p.name for p in tmp_path.iterdir()] == [TEST_LOOK]  # whole, atomic


def test_sweep_looks_leaves_out_train_looks_and_latest_look_follows_it(tmp_path):
    own = {"look": 1, "trial_id": "a", "test_loss": 0.5}
    train = {"look": 2, "by": TRAIN_LOOK, "trial_id": "a", "test_loss": 0.7}
    later = {"look": 3, "trial_id": "b", "test_loss": 0.4}
    assert sweep_looks([own, train, later]) == [own, later] and sweep_looks([train]) == []
    (tmp_path / TEST_LOOK).write_text(json.dumps([own, train]))
    assert latest_look(tmp_path, "a") == own  # the train look scored a model trained again, not trial a
