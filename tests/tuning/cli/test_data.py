"""`mamba-tune data synth | sp500 | check` as a user runs them."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from model.bars import read_bars
from tests.cli import assert_one_line_error, run_cli


def test_cli_data_synth_writes_bars_that_validate(tmp_path):
    out = tmp_path / "bars.parquet"
    done = run_cli("data", "synth", "--out", out, "--bars", "500", "--seed", "7")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote 500 synthetic bars (seed 7) to {out}"
    assert len(read_bars(out)) == 500


def test_cli_data_synth_never_overwrites_without_force(tmp_path):
    out = tmp_path / "bars.parquet"
    out.write_bytes(b"precious")
    assert_one_line_error(run_cli("data", "synth", "--out", out), f"{out} exists, an existing file is never overwritten")
    assert out.read_bytes() == b"precious"
    assert run_cli("data", "synth", "--out", out, "--bars", "300", "--force").returncode == 0
    assert pq.read_metadata(out).num_rows == 300


def test_cli_data_sp500_writes_the_real_daily_bars(tmp_path):
    out = tmp_path / "sp500.parquet"
    done = run_cli("data", "sp500", "--out", out)
    assert done.returncode == 0, done.stderr
    bars = read_bars(out)
    assert len(bars) == 5031
    assert 1200 < bars.close[0] < 1300  # 1999-01-04


def test_cli_data_check_summarises_a_file(tmp_path):
    out = tmp_path / "bars.parquet"
    run_cli("data", "synth", "--out", out, "--bars", "250")
    done = run_cli("data", "check", out)
    assert done.returncode == 0, done.stderr
    assert "rows          250\n" in done.stdout
    assert "time span     2024-01-01 13:30:00 .. 2024-01-03 14:15:00\n" in done.stdout
    assert "bar interval  5m (median)\n" in done.stdout
    assert "gaps          2 longer than 1.5 intervals" in done.stdout  # two overnight breaks in 250 bars


def test_cli_data_check_maps_columns(tmp_path):
    run_cli("data", "synth", "--out", tmp_path / "a.parquet", "--bars", "100")
    table = pq.read_table(tmp_path / "a.parquet")
    pq.write_table(table.rename_columns(["ts_event", "open", "high", "low", "close", "volume"]), tmp_path / "b.parquet")
    assert_one_line_error(run_cli("data", "check", tmp_path / "b.parquet"), f"{tmp_path / 'b.parquet'}: column 'timestamp'")
    done = run_cli("data", "check", tmp_path / "b.parquet", "--column", "timestamp=ts_event")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "no such file"),
        (b"not,a,parquet\n1,2,3\n", "not a Parquet file"),
    ],
)
def test_cli_data_check_bad_file_is_one_line_exit_2(tmp_path, content, match):
    path = tmp_path / "in.parquet"
    if content is not None:
        path.write_bytes(content)
    assert_one_line_error(run_cli("data", "check", path), f"{path}: {match}")


def test_cli_data_check_reports_the_first_bad_row(tmp_path):
    out = tmp_path / "bars.parquet"
    run_cli("data", "synth", "--out", out, "--bars", "100")
    table = pq.read_table(out)
    high = table.column("high").to_numpy().copy()
    high[41] = table.column("low").to_numpy()[41] - 1
    pq.write_table(table.set_column(2, "high", [high]), out)
    assert_one_line_error(run_cli("data", "check", out), f"{out}: column 'high' at row 41 is below low")


def test_cli_data_synth_out_under_a_file_is_one_line_exit_2(tmp_path):
    (tmp_path / "file").write_text("x")
    assert_one_line_error(run_cli("data", "synth", "--out", tmp_path / "file" / "bars.parquet"),
                          f"--out {tmp_path / 'file' / 'bars.parquet'}: a parent of it is a file")
