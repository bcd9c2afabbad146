"""docs/python-api.md's walk-through runs as written: its python blocks, in order, in one fresh folder, each block's
printed output checked against the text block shown below it (doctest's rules: `...` stands for what differs from run
to run, whitespace is free). A real sweep with Ray: two trials of four epochs, the
winner trained again, registered and promoted."""

from __future__ import annotations

import contextlib
import doctest
import io
import re

import pytest

from tests.api.test_public_names import PAGE

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # a whole (small) sweep, with Ray and MLflow

BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n```text\n(.*?)```\n)?", re.S)


def walkthrough_blocks() -> list[tuple[str, str]]:
    """(code, expected output) of each python block of the walk-through; "" where no output is shown."""
    text = PAGE.read_text().split("\n## Walk-through\n", 1)[1].split("\n## ", 1)[0]
    return [(code, shown or "") for code, shown in BLOCK.findall(text)]


def test_the_walkthrough_has_its_steps():
    codes = "".join(code for code, _ in walkthrough_blocks())
    for step in ("synth_bars(", "sweep(", ".leaderboard", "best(", "train(", "register=", "promote(", "InputError"):
        assert step in codes


def test_the_walkthrough_runs_as_written_and_prints_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a fresh folder: runs/sweeps, runs/winner, bars.parquet are its own
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # and its own MLflow store, runs/mlflow: version 1
    checker, flags = doctest.OutputChecker(), doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    namespace: dict = {}
    for number, (code, shown) in enumerate(walkthrough_blocks(), start=1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{PAGE.name} block {number}", "exec"), namespace)  # noqa: S102 - the page's own code
        assert checker.check_output(shown, printed.getvalue(), flags), \
            f"block {number}:\n{code}\nshown:\n{shown}\nprinted:\n{printed.getvalue()}"
