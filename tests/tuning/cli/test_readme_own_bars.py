"""The README's "Your own bars", run as written: a CSV of real daily bars in Yahoo's layout, then the section's own
commands (import, check, the smoke sweep), read from the README itself so that the page and the tool cannot drift."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.bars import write_csv, yahoo_rows
from tests.cli import ROOT, run_cli
from tuning.cli.data import arch_daily_bars

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # a whole smoke sweep: the longer tier, for time


def readme_commands() -> list[list[str]]:
    """The `mamba-tune` command lines of the README's "Your own bars" block, as argument lists after the program."""
    section = ROOT.joinpath("README.md").read_text().split("### Your own bars", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(".venv/bin/mamba-tune ")]


def test_the_readmes_own_bars_commands_run_a_smoke_sweep_from_a_yahoo_csv(tmp_path):
    commands = readme_commands()
    assert [c[:2] for c in commands] == [["data", "import"], ["data", "check"], ["sweep", "--data"]]
    write_csv(tmp_path / "SPY.csv", yahoo_rows(arch_daily_bars("sp500")))  # step 1: the export
    space = str(ROOT / "search_spaces" / "smoke.yaml")
    outputs = []
    for command in commands:
        args = [space if arg == "search_spaces/smoke.yaml" else arg for arg in command]
        done = run_cli(*args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr[-3000:])
        outputs.append(done.stdout)
    assert "wrote 5,031 bars to runs/spy.parquet (from SPY.csv, csv: timestamp=Date" in outputs[0]
    assert "imported from" in outputs[1] and "enough for" in outputs[1]
    assert re.search(r"test segment: winner [\d.]+ vs HAR [\d.]+", outputs[2]), outputs[2][-2000:]
    (look,) = json.loads((tmp_path / "runs" / "sweeps" / "smoke" / "test.json").read_text())  # once
    assert look["n_test"] == 466 and look["trials"] == 8  # the test segment of the 5,031 bars, after 8 trials
