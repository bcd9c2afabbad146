"""Checkpoint files: atomic writes, safe loads."""

from __future__ import annotations

import errno

import pytest
import torch

from model import checkpoint
from model.checkpoint import CheckpointError, load_checkpoint, save_atomic


def test_save_atomic_round_trips_tensors_and_plain_values(tmp_path):
    payload = {"w": torch.arange(4.0), "epoch": 3, "history": [{"val_loss": 0.5}], "name": "x"}
    save_atomic(payload, tmp_path / "c.pt")
    loaded = load_checkpoint(tmp_path / "c.pt")
    torch.testing.assert_close(loaded["w"], payload["w"])
    assert (loaded["epoch"], loaded["history"], loaded["name"]) == (3, [{"val_loss": 0.5}], "x")


def test_save_atomic_keeps_the_previous_file_when_the_disk_fills(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_atomic({"epoch": 1, "w": torch.ones(3)}, path)

    def full_disk(obj, handle):
        handle.write(b"partial bytes")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save_atomic({"epoch": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert load_checkpoint(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary left behind


class Payload:
    def __reduce__(self):
        return (print, ("arbitrary code ran",))


def test_load_checkpoint_refuses_arbitrary_objects(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"x": Payload()}, path)
    with pytest.raises(CheckpointError, match=r"evil.pt: cannot load the checkpoint \(Weights only load failed"):
        load_checkpoint(path)


def test_load_checkpoint_of_a_damaged_file_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "last.pt"
    save_atomic({"w": torch.ones(100)}, path)
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(CheckpointError, match=r"last.pt: cannot load the checkpoint"):
        load_checkpoint(path)
