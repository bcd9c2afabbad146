"""require_enough_bars's refusal names the smallest change of each setting with which the bars are enough: each
change it names is applied here and is enough, and one step less is not."""

from __future__ import annotations

import dataclasses
import re

import pytest

from model.bars import DataError
from model.bars_enough import bars_needed, enough_bars, require_enough_bars
from model.data import DataConfig

DEFAULT = DataConfig()  # search_spaces/default.yaml's data settings: window 128, horizon 12, 0.2 and 0.1
SMALLER = {"val_fraction": -0.01, "test_fraction": -0.01}  # one grid step back of a raised fraction


def refusal(n: int, config: DataConfig) -> str:
    with pytest.raises(DataError) as info:
        require_enough_bars("bars.parquet", n, config)
    assert "\n" not in str(info.value)
    return str(info.value)


def changes(message: str) -> list[str]:
    """The changes after "; use more bars, or ", e.g. ["data.window at most 83", "data.test_fraction 0.14"]."""
    return message.split("; use more bars")[1].removeprefix(", or ").split(", or ") if ", or " in message else []


def applied(config: DataConfig, change: str) -> DataConfig:
    """`config` with one named change: data.window at most W, data.X_fraction F [with ...], confirm.folds at most K."""
    if (window := re.fullmatch(r"data\.window at most (\d+)( \(the run's and every value the search tries\))?",
                               change)) is not None:
        longest = int(window.group(1))
        aligned = longest if config.align_window is not None else None
        return dataclasses.replace(config, window=min(config.window, longest), align_window=aligned)
    if (folds := re.fullmatch(r"confirm\.folds at most (\d+)", change)) is not None:
        return dataclasses.replace(config, fold=int(folds.group(1)))
    fractions = dict(re.fullmatch(r"data\.(val_fraction|test_fraction) ([\d.]+)", part).groups()
                     for part in change.split(" with "))
    return dataclasses.replace(config, **{name: float(value) for name, value in fractions.items()})


@pytest.mark.parametrize(("n", "config", "expected"), [
    (1260, DEFAULT, ["data.window at most 83", "data.test_fraction 0.14"]),  # five years of daily bars
    (800, DEFAULT, ["data.window at most 37", "data.val_fraction 0.22 with data.test_fraction 0.22"]),
    (1000, DataConfig(window=32, horizon=6, align_window=256),  # a sweep searching data.window up to 256
     ["data.window at most 63 (the run's and every value the search tries)",
      "data.val_fraction 0.3 with data.test_fraction 0.3"]),
    (3000, DataConfig(window=16, horizon=4, val_fraction=0.298, fold=3),
     ["data.window at most 13", "confirm.folds at most 2"]),
    (300, DEFAULT, []),  # nothing but more bars: 30 test bars cannot hold 32 samples of any window
])
def test_each_change_named_is_enough_and_one_step_less_is_not(n, config, expected):
    message = refusal(n, config)
    assert f"need {bars_needed(config):,} bars at data.val_fraction {config.val_fraction} and data.test_fraction " \
           f"{config.test_fraction}" in message
    assert changes(message) == expected, message
    for change in expected:
        assert enough_bars(n, applied(config, change)), change
        require_enough_bars("bars.parquet", n, applied(config, change))  # the refusal's own check agrees
        if change.startswith("data.window"):
            longest = int(change.split()[3])
            assert not enough_bars(n, applied(config, f"data.window at most {longest + 1}"))
        elif change.startswith("confirm.folds"):
            assert not enough_bars(n, applied(config, f"confirm.folds at most {int(change.split()[3]) + 1}"))
        else:
            changed = applied(config, change)
            for name, step in SMALLER.items():  # either raised fraction one step less is not enough
                if getattr(changed, name) != getattr(config, name):
                    assert not enough_bars(n, dataclasses.replace(changed, **{name: getattr(changed, name) + step}))


def test_a_window_shorter_than_a_lookback_is_not_offered():
    """sp500.yaml's leverage_lookbacks reach 22 bars back: a window shorter than that is no change that fits."""
    config = DataConfig(window=64, horizon=12, leverage_lookbacks=(1, 5, 22))
    assert changes(refusal(800, config))[0] == "data.window at most 37"  # 37 >= 22: offered
    assert not any(change.startswith("data.window") for change in changes(refusal(
        700, DataConfig(window=64, horizon=12, leverage_lookbacks=(1, 5, 22, 40)))))


def test_enough_bars_is_what_bars_needed_bisects():
    needed = bars_needed(DEFAULT)
    assert needed == 1705 and enough_bars(needed, DEFAULT) and not enough_bars(needed - 1, DEFAULT)


def test_the_refusal_of_too_few_bars_keeps_its_bar_count_when_pickled():
    """A Ray worker's refusal reaches the driver whole: its line and the count the spaces suffix reads."""
    import pickle

    from model.bars_enough import TooFewBars

    with pytest.raises(TooFewBars) as info:
        require_enough_bars("bars.parquet", 1260, DEFAULT)
    again = pickle.loads(pickle.dumps(info.value))
    assert isinstance(again, DataError) and again.n == 1260 and str(again) == str(info.value)
    assert str(again).startswith("bars.parquet: 1,260 bars are too few") and "need 1,705 bars" in str(again)
