"""`data check` names the shipped spaces the bars are enough for, and its refusal the changes that make the asked
one fit: five years of daily bars (1,260) and 800 bars against smoke, sp500 and default."""

from __future__ import annotations

import pytest

from tests.bars import write_bars
from tuning.cli.main import main

DEFAULT_NEEDS = "default needs 1,705 bars"  # window 128 + horizon 12 at 0.2 and 0.1: search_spaces/default.yaml


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    """{count: a file of that many bars}."""
    folder = tmp_path_factory.mktemp("bars")
    return {n: write_bars(folder / f"{n}.parquet", n, seed=0) for n in (1260, 800)}


SETTINGS = {"smoke": "data.window 32, data.horizon 6", "sp500": "data.window 64, data.horizon 12"}


@pytest.mark.parametrize(("n", "space", "fits"), [
    (1260, "smoke", "the shipped spaces smoke, sp500 (" + DEFAULT_NEEDS + ")"),
    (1260, "sp500", "the shipped spaces smoke, sp500 (" + DEFAULT_NEEDS + ")"),
    (800, "smoke", "the shipped space smoke (" + DEFAULT_NEEDS + ", sp500 needs 1,065 bars)"),
])
def test_check_names_the_shipped_spaces_the_bars_are_enough_for(bars, capsys, n, space, fits):
    assert main(["data", "check", str(bars[n]), "--space", space]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("settings      enough for ")  # the asked space's settings
    assert lines[-2].endswith(f"{space}.yaml: {SETTINGS[space]}, data.val_fraction 0.2, data.test_fraction 0.1")
    assert lines[-1] == f"spaces        enough for {fits}"


@pytest.mark.parametrize(("n", "space", "refusal"), [
    (1260, "default", "1,260 bars are too few, window 128 + horizon 12 + at least 32 samples in the validation and "
                      "test segments need 1,705 bars at data.val_fraction 0.2 and data.test_fraction 0.1; use more "
                      "bars, or data.window at most 83, or data.test_fraction 0.14; these 1,260 bars are enough for "
                      "the shipped spaces smoke, sp500 (" + DEFAULT_NEEDS + ")"),
    (800, "sp500", "800 bars are too few, window 64 + horizon 12 + at least 32 samples in the validation and test "
                   "segments need 1,065 bars at data.val_fraction 0.2 and data.test_fraction 0.1; use more bars, or "
                   "data.window at most 37, or data.test_fraction 0.14; these 800 bars are enough for the shipped "
                   "space smoke (" + DEFAULT_NEEDS + ", sp500 needs 1,065 bars)"),
])
def test_too_few_bars_for_the_space_is_one_line_naming_what_fits(bars, capsys, n, space, refusal):
    assert main(["data", "check", str(bars[n]), "--space", space]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {bars[n]}: {refusal}\n" and captured.out == ""


def test_the_changes_named_make_the_asked_space_fit(bars, capsys, tmp_path):
    """default.yaml's settings with data.window 83, or with data.test_fraction 0.14: 1,260 bars are enough."""
    for change in ("window: 83", "test_fraction: 0.14"):
        config = tmp_path / "changed.yaml"
        config.write_text(f"data: {{horizon: 12, {change}}}\n")
        assert main(["data", "check", str(bars[1260]), "--config", str(config)]) == 0, capsys.readouterr().err
    config.write_text("data: {horizon: 12, window: 84}\n")  # one bar longer: too few again
    assert main(["data", "check", str(bars[1260]), "--config", str(config)]) == 2


def test_sweep_refuses_too_few_bars_naming_the_spaces_they_are_enough_for(bars, capsys, tmp_path):
    """As `data check`'s refusal: the changes that fit, then the shipped spaces; before Ray, nothing written."""
    storage = tmp_path / "sweeps"
    assert main(["sweep", "--data", str(bars[1260]), "--space", "default", "--storage", str(storage)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {bars[1260]}: 1,260 bars are too few, window 128 + horizon 12")
    assert captured.err.endswith("use more bars, or data.window at most 83, or data.test_fraction 0.14; these 1,260 "
                                 "bars are enough for the shipped spaces smoke, sp500 (" + DEFAULT_NEEDS + ")\n")
    assert captured.err.count("\n") == 1 and not storage.exists()
