"""`mamba-tune data synth | sp500 | nasdaq | check` as a user runs them."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from model.bars import read_bars
from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import write_space

# Data settings a few hundred bars are enough for (the defaults, window 128, need 1,705 bars).
SHORT = "data: {window: 8, horizon: 2, val_fraction: 0.3, test_fraction: 0.2}\n"


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


@pytest.mark.parametrize(("index", "first_close"), [("sp500", (1200, 1300)), ("nasdaq", (2200, 2300))])
def test_cli_data_writes_the_real_daily_bars_arch_ships(index, first_close, tmp_path):
    out = tmp_path / f"{index}.parquet"
    done = run_cli("data", index, "--out", out)
    assert done.returncode == 0, done.stderr
    bars = read_bars(out)
    assert len(bars) == 5031  # 1999-01-04 .. 2018-12-31
    assert first_close[0] < bars.close[0] < first_close[1]
    assert done.stdout.startswith("wrote 5,031 ")
    assert_one_line_error(run_cli("data", index, "--out", out), f"{out} exists, an existing file is never overwritten")


def test_cli_data_check_summarises_a_file(tmp_path):
    out = tmp_path / "bars.parquet"
    run_cli("data", "synth", "--out", out, "--bars", "250")
    (tmp_path / "short.yaml").write_text(SHORT)
    done = run_cli("data", "check", out, "--config", tmp_path / "short.yaml")
    assert done.returncode == 0, done.stderr
    assert "rows          250\n" in done.stdout
    assert "time span     2024-01-01 13:30:00 .. 2024-01-03 14:15:00 (UTC)\n" in done.stdout
    assert "time zone     UTC (time-of-day features read this clock)\n" in done.stdout
    assert "bar interval  5m (median)\n" in done.stdout
    assert "gaps          2 longer than 1.5 intervals" in done.stdout  # two overnight breaks in 250 bars
    assert f"settings      enough for {tmp_path / 'short.yaml'}: data.window 8, data.horizon 2, data.val_fraction 0.3" in done.stdout


def test_cli_data_check_refuses_too_few_bars_for_the_settings_naming_the_count_needed(tmp_path):
    out = tmp_path / "bars.parquet"
    run_cli("data", "synth", "--out", out, "--bars", "12")
    assert_one_line_error(run_cli("data", "check", out), f"{out}: 12 bars are too few, window 128 + horizon 12 + at "
                          "least 32 samples in the validation and test segments need 1,705 bars")
    run_cli("data", "synth", "--out", out, "--bars", "1500", "--force")
    space = write_space(tmp_path, confirm={"top_k": 1, "folds": 5})  # window 16: enough bars, too many folds
    assert_one_line_error(run_cli("data", "check", out, "--space", space),
                          f"{out}: walk-forward fold 5 (confirm.folds) would start before the first bar")
    done = run_cli("data", "check", out, "--space", write_space(tmp_path, confirm={"top_k": 1, "folds": 2}))
    assert done.returncode == 0 and ": data.window 16, data.horizon 4, data.val_fraction 0.2, data.test_fraction 0.1, " \
        "confirm.folds 2" in done.stdout, done.stdout + done.stderr
    assert_one_line_error(run_cli("data", "check", out, "--config", space, "--space", space),
                          "argument --space: not allowed with argument --config")


def test_cli_data_check_maps_columns(tmp_path):
    run_cli("data", "synth", "--out", tmp_path / "a.parquet", "--bars", "250")
    table = pq.read_table(tmp_path / "a.parquet")
    pq.write_table(table.rename_columns(["ts_event", "open", "high", "low", "close", "volume"]), tmp_path / "b.parquet")
    assert_one_line_error(run_cli("data", "check", tmp_path / "b.parquet"), f"{tmp_path / 'b.parquet'}: column 'timestamp'")
    (tmp_path / "short.yaml").write_text(SHORT)
    done = run_cli("data", "check", tmp_path / "b.parquet", "--column", "timestamp=ts_event",
                   "--config", tmp_path / "short.yaml")
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


def test_cli_data_synth_after_a_file_starts_the_monday_after_its_last_bar(tmp_path):
    run_cli("data", "synth", "--out", tmp_path / "old.parquet", "--bars", "300")
    done = run_cli("data", "synth", "--out", tmp_path / "new.parquet", "--bars", "50", "--seed", "2", "--after",
                   tmp_path / "old.parquet")
    assert done.returncode == 0 and f"(seed 2, after the bars of {tmp_path / 'old.parquet'})" in done.stdout
    old, new = read_bars(tmp_path / "old.parquet"), read_bars(tmp_path / "new.parquet")
    # 300 bars of 120 a day end on Wednesday 2024-01-03; the next Monday is 2024-01-08, its session at 13:30
    assert str(old.timestamp[-1].astype("datetime64[ns]"))[:10] == "2024-01-03"
    assert str(new.timestamp[0].astype("datetime64[ns]")) == "2024-01-08T13:30:00.000000000"
