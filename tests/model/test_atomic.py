"""Atomic writes (model/atomic.py): whole or not at all, with the usual permissions, and the process umask, which
every thread shares, left alone."""

from __future__ import annotations

import os
import stat
import sys
import threading

import pytest

from model import atomic
from model.atomic import atomic_path, write_text_atomic

UMASK = 0o027  # the test's umask: 0o640 for new files, so that a file made under a umask of 0 shows


@pytest.fixture()
def umask():
    before = os.umask(UMASK)  # set before any thread starts; put back after
    yield UMASK
    os.umask(before)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_write_text_atomic_gives_a_new_file_0666_less_the_umask(tmp_path, umask):
    write_text_atomic(tmp_path / "a.json", "{}")
    assert mode(tmp_path / "a.json") == 0o666 & ~umask
    assert (tmp_path / "a.json").read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_write_text_atomic_keeps_an_existing_files_mode(tmp_path, umask):
    path = tmp_path / "private.json"
    path.write_text("{}")
    path.chmod(0o600)
    write_text_atomic(path, '{"a": 1}')
    assert mode(path) == 0o600 and path.read_text() == '{"a": 1}'


def test_atomic_path_never_touches_the_umask(tmp_path, umask, monkeypatch):
    def refuse(mask):
        raise AssertionError(f"os.umask({mask:#o}) called: the umask is the whole process's, every thread's")

    monkeypatch.setattr(atomic.os, "umask", refuse)
    write_text_atomic(tmp_path / "a.json", "{}")
    assert mode(tmp_path / "a.json") == 0o666 & ~umask


def test_atomic_path_leaves_other_threads_files_their_umask_mode(tmp_path, umask):
    """A thread writing atomically while another creates plain files: each plain file gets 0666 less the umask."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes: a window of a few shows
    done, modes = threading.Event(), []

    def write_atomically():
        try:
            for i in range(3000):
                write_text_atomic(tmp_path / "atomic" / "state.json", str(i))
        finally:
            done.set()

    def create_plain_files():
        (tmp_path / "plain").mkdir()
        i = 0
        while not done.is_set():
            path = tmp_path / "plain" / f"{i}.txt"
            with open(path, "w"):
                pass
            modes.append(mode(path))
            path.unlink()
            i += 1

    threads = [threading.Thread(target=write_atomically), threading.Thread(target=create_plain_files)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(before)
    assert modes and {oct(m) for m in modes} == {oct(0o666 & ~umask)}
    assert [p.name for p in (tmp_path / "atomic").iterdir()] == ["state.json"]  # no temporary left behind


def test_atomic_path_leaves_the_previous_file_and_no_temporary_when_the_block_fails(tmp_path):
    path = tmp_path / "trials.json"
    write_text_atomic(path, "[1]")
    with pytest.raises(OSError, match="No space left"), atomic_path(path) as tmp:
        tmp.write_text("[1, 2")
        raise OSError(28, "No space left on device")
    assert path.read_text() == "[1]" and [p.name for p in tmp_path.iterdir()] == ["trials.json"]
