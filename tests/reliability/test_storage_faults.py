"""Storage that cannot be written, and a disk that fills while a checkpoint is written: real file systems.

Read-only and full file systems are made for real, as root can: a bind mount remounted
read-only, and a 128 KiB tmpfs, each in a private mount namespace (`unshare`) of the CLI
process alone, so nothing outside the test sees them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from tests.cli import ROOT, assert_one_line_error, cli_command, run_cli
from tests.tuning.sweeps import write_space

pytestmark = pytest.mark.integration
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a file system: needs root (CI runs as root)")
TINY_RUN = """data: {window: 16, horizon: 4}
model: {d_model: 16, n_layers: 1, d_state: 16, headdim: 8, chunk_size: 16}
train: {epochs: 3, batch_size: 64, device: cpu}
"""


def in_namespace(setup: str, command: list[str], then: str = "") -> subprocess.CompletedProcess:
    """Run `setup` (mounts), then `command` (its exit code kept in $rc), then `then`, in a mount namespace."""
    script = f"set -e; {setup}; set +e; {shlex.join(command)}; rc=$?; {then} exit $rc"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_storage_under_a_file_is_one_line_exit_2_before_anything_starts(bars, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("kept")
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", blocker / "sweeps", timeout=120)
    assert_one_line_error(done, f"--storage {blocker / 'sweeps'}: {blocker} is a file, not a folder; choose another")
    assert blocker.read_text() == "kept"


@NEEDS_ROOT
def test_storage_on_a_read_only_file_system_is_one_line_exit_2_and_what_is_there_stays(bars, tmp_path):
    shared = tmp_path / "shared"
    (shared / "other").mkdir(parents=True)
    (shared / "other" / "results.json").write_text('{"kept": true}')
    folder = shlex.quote(str(shared))
    done = in_namespace(f"mount --bind {folder} {folder}; mount -o remount,bind,ro {folder}",
                        cli_command("sweep", "--data", bars, "--space", write_space(tmp_path),
                                      "--storage", shared / "sweeps"))
    assert_one_line_error(done, f"--storage {shared / 'sweeps'}: {shared} is not writable (permissions or a "
                                "read-only file system); choose another --storage")
    assert sorted(p.name for p in shared.iterdir()) == ["other"]
    assert json.loads((shared / "other" / "results.json").read_text()) == {"kept": True}


@NEEDS_ROOT
def test_a_disk_that_fills_during_training_keeps_the_last_checkpoint_valid(bars, tmp_path):
    """128 KiB: the config and the epoch-0 checkpoints fit, the next checkpoint does not."""
    config, disk = tmp_path / "run.yaml", tmp_path / "small-disk"
    config.write_text(TINY_RUN)
    disk.mkdir()
    out = disk / "run"
    check = (f"{shlex.quote(sys.executable)} -c "
             + shlex.quote("import json, os, sys; from model.checkpoint import load_checkpoint; "
                           f"c = load_checkpoint({str(out / 'last.pt')!r}); "
                           f"print(json.dumps({{'epoch': c['epoch'], 'files': sorted(os.listdir({str(out)!r}))}}))")
             + ";")
    done = in_namespace(f"mount -t tmpfs -o size=128k mt-small-disk {shlex.quote(str(disk))}",
                        cli_command("train", "--data", bars, "--config", config, "--out", out), then=check)
    assert done.returncode == 1, done.stdout + done.stderr
    error = done.stderr.strip().splitlines()
    assert len(error) == 1 and "Traceback" not in done.stderr, done.stderr
    assert error[0].startswith(f"error: {out}/") and ": No space left on device, the file system refused" in error[0]
    saved = json.loads(done.stdout.strip().splitlines()[-1])  # read back inside the namespace, after the failure
    assert saved["epoch"] == 0  # the checkpoint before the full disk, whole and loadable
    assert not [name for name in saved["files"] if name.endswith(".tmp")]  # no half-written file left
