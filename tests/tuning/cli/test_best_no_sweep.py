"""`best NAME` of no such sweep lists the sweeps it finds (the default storage's, the demo's, the asked one's), each
with the --storage that names it: one line, exit 2. Storage folders made by hand: no sweep runs."""

from __future__ import annotations

import pytest

from tuning.cli.main import main


def make_sweep(folder, name):
    (folder / name).mkdir(parents=True)
    (folder / name / "sweep.json").write_text("{}")  # what marks a sweep folder


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """A working directory as a checkout's after `make demo` and one sweep of the user's: runs/sweeps/mine and
    runs/demo/sweeps/smoke."""
    monkeypatch.chdir(tmp_path)
    make_sweep(tmp_path / "runs" / "sweeps", "mine")
    make_sweep(tmp_path / "runs" / "demo" / "sweeps", "smoke")
    return tmp_path


def refusal(capsys, *argv: str) -> str:
    assert main(["best", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    return captured.err.removeprefix("error: ").rstrip("\n")


def test_a_sweep_of_another_storage_is_named_with_its_storage(here, capsys):
    assert refusal(capsys, "smoke") == (
        f"no sweep named 'smoke' in {here / 'runs' / 'sweeps'}; sweeps found: mine (runs/sweeps, the default), "
        "smoke (runs/demo/sweeps: --storage runs/demo/sweeps); name one, or pass --storage DIR, the folder the sweep "
        "was started with")
    assert not (here / "runs" / "sweeps" / "smoke").exists()  # nothing written


def test_the_asked_storage_is_listed_too_and_each_storage_once(here, capsys):
    make_sweep(here / "mine", "other")
    assert refusal(capsys, "nope", "--storage", "mine").endswith(
        "sweeps found: other (mine: --storage mine), mine (runs/sweeps, the default), smoke (runs/demo/sweeps: "
        "--storage runs/demo/sweeps); name one, or pass --storage DIR, the folder the sweep was started with")
    assert refusal(capsys, "nope", "--storage", "runs/sweeps/").count("mine (") == 1  # the default storage: once


def test_no_sweep_anywhere_says_how_to_make_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert refusal(capsys, "smoke") == (
        f"no sweep named 'smoke' in {tmp_path / 'runs' / 'sweeps'}, nor any sweep there or in runs/demo/sweeps; "
        "start one with `mamba-tune sweep` (`make demo` sweeps smoke into runs/demo/sweeps), or pass --storage DIR, "
        "the folder the sweep was started with")


def test_resume_of_no_such_sweep_is_refused_as_best_does(here, capsys):
    expected = refusal(capsys, "nope")
    assert main(["resume", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {expected}\n" and "sweeps found: mine (runs/sweeps, the default)" in expected
    assert not (here / "runs" / "sweeps" / "nope").exists()  # nothing written
