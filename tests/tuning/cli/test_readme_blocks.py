"""The README's two blocks, "Your own bars" then "What a sweep does", run as written, in order, in one folder: five
years of real daily bars exported in Yahoo's layout, the four commands to a verdict, then a variant sweep, its
resume, its winner trained again and its UI. Read from the README itself, so that the page and the tool cannot
drift; the one change made to a command is a free --port for `ui` (5000 may be taken on a test machine)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import pytest

from tests.bars import write_csv, yahoo_rows
from tests.cli import cli_command, cli_env, free_port, run_cli
from tests.processes import wait_until_healthy
from tests.readme_commands import block_commands
from tuning.cli.data import arch_daily_bars

pytestmark = [pytest.mark.integration, pytest.mark.faults]  # two whole smoke sweeps: the longer tier, for time

FIVE_YEARS = 1260  # trading days
VERDICT = re.compile(r"test segment: winner [\d.]+ vs HAR [\d.]+ \([^)]*\): (better than|worse than|not "
                     r"distinguishable from) HAR")


def run(command: list[str], cwd) -> str:
    done = run_cli(*command, cwd=cwd)
    assert done.returncode == 0, (command, done.stderr[-3000:])
    return done.stdout


def test_the_readmes_blocks_run_as_written_from_a_five_year_daily_csv(tmp_path):
    sp500 = arch_daily_bars("sp500")
    write_csv(tmp_path / "SPY.csv", yahoo_rows(sp500.slice(sp500.num_rows - FIVE_YEARS)))  # the export
    imported, checked, swept, best = (run(command, tmp_path) for command in block_commands("### Your own bars"))
    assert f"wrote {FIVE_YEARS:,} bars to runs/spy.parquet (from SPY.csv, csv: timestamp=Date" in imported
    assert "enough for" in checked and "smoke" in checked
    assert VERDICT.search(swept), swept[-2000:]
    (look,) = json.loads((tmp_path / "runs" / "sweeps" / "smoke" / "test.json").read_text())  # once
    assert look["trials"] == 8 and look["n_test"] > 0
    assert (tmp_path / "runs" / "spy-best.yaml").is_file(), best

    *commands, ui = block_commands("## What a sweep does")
    outputs = [run(command, tmp_path) for command in commands]
    keys, shown, wider, resumed, wider_best, trained = outputs
    assert "model.d_model" in keys and "train.lr" in keys
    assert "d_model: 32" in shown
    assert VERDICT.search(wider), wider[-2000:]
    assert "has finished all 4 trials" in resumed, resumed
    config = (tmp_path / "runs" / "wider-best.yaml").read_text()
    assert "d_model: 64" in config, config
    assert (tmp_path / "runs" / "wider-train").is_dir(), trained

    port = free_port()
    server = subprocess.Popen(cli_command(*ui, "--port", port), cwd=tmp_path, env=cli_env(BROWSER="true"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_healthy(server, f"http://127.0.0.1:{port}/health", 120, lambda: "")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.status == 200
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
    assert "wider" in output, output[-2000:]
