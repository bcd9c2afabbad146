"""synth_bars: deterministic, valid, ES-like bars (tick, sessions, fat tails, clustering, U-shaped day)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import read_bars
from model.synth import BAR_NS, BARS_PER_DAY, SESSION_OPEN_NS, TICK, synth_bars

N_LONG = 20_040  # 167 sessions
NS_PER_DAY = 86_400 * 10**9


@pytest.fixture(scope="module")
def long_table() -> pa.Table:
    return synth_bars(N_LONG, seed=11)


def column(table, name):
    return table.column(name).to_numpy()


def timestamps(table):
    return table.column("timestamp").combine_chunks().view(pa.int64()).to_numpy()


def session_returns(table):
    """Close-to-close log returns within sessions, and the session slot of the later bar."""
    close = column(table, "close")
    slot = np.arange(len(close)) % BARS_PER_DAY
    returns = np.diff(np.log(close))
    same = slot[1:] != 0
    return returns, same, slot[1:]


def test_synth_bars_is_deterministic_from_the_seed():
    a, b, other = synth_bars(1500, seed=4), synth_bars(1500, seed=4), synth_bars(1500, seed=5)
    assert a.equals(b)
    assert not a.equals(other)
    assert not np.array_equal(column(a, "close"), column(other, "close"))
    np.testing.assert_array_equal(timestamps(a), timestamps(other))  # the calendar does not depend on the seed


def test_synth_bars_columns_and_types():
    table = synth_bars(700, seed=0)
    assert table.column_names == ["timestamp", "open", "high", "low", "close", "volume"]
    assert table.num_rows == 700
    assert table.schema.field("timestamp").type == pa.timestamp("ns", tz="UTC")
    for name in ("open", "high", "low", "close"):
        assert table.schema.field(name).type == pa.float64()
    assert table.schema.field("volume").type == pa.int64()
    assert all(table.column(name).null_count == 0 for name in table.column_names)


def test_synth_bars_prices_on_the_tick_and_consistent(long_table):
    prices = {name: column(long_table, name) for name in ("open", "high", "low", "close")}
    for name, values in prices.items():
        assert np.isfinite(values).all(), name
        assert (values > 0).all(), name
        ticks = values / TICK
        np.testing.assert_array_equal(ticks, np.round(ticks), err_msg=name)
    high, low = prices["high"], prices["low"]
    assert (high >= np.maximum(prices["open"], prices["close"])).all()
    assert (low <= np.minimum(prices["open"], prices["close"])).all()
    assert (high > low).mean() > 0.9  # bars have a range, not just a print
    assert (column(long_table, "volume") >= 0).all()


def test_synth_bars_open_continues_the_previous_close_within_a_session(long_table):
    open_, close = column(long_table, "open"), column(long_table, "close")
    slot = np.arange(N_LONG) % BARS_PER_DAY
    inside = slot[1:] != 0
    np.testing.assert_array_equal(open_[1:][inside], close[:-1][inside])
    assert (open_[1:][~inside] != close[:-1][~inside]).mean() > 0.5  # overnight gaps


def test_synth_bars_sessions_of_5_minute_bars_on_weekdays():
    n = 3 * BARS_PER_DAY * 5 + 17  # three weeks and a bit
    ts = timestamps(synth_bars(n, seed=0))
    assert (np.diff(ts) > 0).all()
    days = ts // NS_PER_DAY
    assert np.is_busday(days.astype("datetime64[D]")).all()
    unique_days, counts = np.unique(days, return_counts=True)
    np.testing.assert_array_equal(counts[:-1], np.full(len(counts) - 1, BARS_PER_DAY))
    assert counts[-1] == 17
    assert len(unique_days) == 16
    np.testing.assert_array_equal(np.unique(np.diff(unique_days)), [1, 3])  # weekday to weekday, Friday to Monday
    time_of_day = ts % NS_PER_DAY
    np.testing.assert_array_equal(time_of_day, SESSION_OPEN_NS + (np.arange(n) % BARS_PER_DAY) * BAR_NS)
    within = np.diff(ts)[days[1:] == days[:-1]]
    np.testing.assert_array_equal(np.unique(within), [5 * 60 * 10**9])
    assert np.datetime64(int(ts[0]), "ns") == np.datetime64("2024-01-01T13:30")


def test_synth_bars_price_level_near_5000():
    close = column(synth_bars(600, seed=0), "close")
    assert abs(close[0] / 5000 - 1) < 0.01
    assert column(synth_bars(600, seed=0, price=2000.0), "close")[0] == pytest.approx(2000, rel=0.01)


def test_synth_bars_returns_have_fat_tails(long_table):
    returns, same, _ = session_returns(long_table)
    r = returns[same]
    z = r - r.mean()
    kurtosis = np.mean(z**4) / np.mean(z**2) ** 2
    assert kurtosis > 6  # a normal distribution has 3


def test_synth_bars_volatility_clusters(long_table):
    returns, same, _ = session_returns(long_table)
    a = np.abs(returns)
    pair = same[:-1] & same[1:]  # both returns inside one session
    lag1 = np.corrcoef(a[:-1][pair], a[1:][pair])[0, 1]
    assert lag1 > 0.1
    # Clustering beyond the intraday shape: daily realised volatility persists from day to day.
    a_day = np.where(same, returns**2, 0.0)[: (len(a) // BARS_PER_DAY) * BARS_PER_DAY].reshape(-1, BARS_PER_DAY).sum(1)
    log_rv = np.log(a_day)
    assert np.corrcoef(log_rv[:-1], log_rv[1:])[0, 1] > 0.3


def test_synth_bars_intraday_seasonality(long_table):
    returns, same, slot = session_returns(long_table)
    a = np.abs(returns)
    edges = same & ((slot <= 10) | (slot >= BARS_PER_DAY - 10))
    middle = (slot >= 50) & (slot < 70)
    assert a[edges].mean() > 1.3 * a[middle].mean()
    volume = column(long_table, "volume").astype(np.float64)
    volume_slot = np.arange(N_LONG) % BARS_PER_DAY
    assert volume[(volume_slot < 10) | (volume_slot >= BARS_PER_DAY - 10)].mean() > 1.3 * volume[(volume_slot >= 50) & (volume_slot < 70)].mean()


def test_synth_bars_pass_read_bars_validation(tmp_path):
    table = synth_bars(3000, seed=2)
    path = tmp_path / "synth.parquet"
    pq.write_table(table, path)
    bars = read_bars(path)
    assert len(bars) == 3000
    torch.testing.assert_close(torch.from_numpy(bars.close.copy()), torch.from_numpy(column(table, "close").copy()), rtol=0, atol=0)
    np.testing.assert_array_equal(bars.timestamp, timestamps(table))


def test_synth_bars_one_bar():
    table = synth_bars(1, seed=0)
    assert table.num_rows == 1
    assert column(table, "open")[0] == 5000.0
    assert column(table, "low")[0] <= min(column(table, "open")[0], column(table, "close")[0])


@pytest.mark.parametrize("n_bars", [0, -5])
def test_synth_bars_rejects_no_bars(n_bars):
    with pytest.raises(ValueError, match=rf"n_bars must be at least 1, got {n_bars}"):
        synth_bars(n_bars)
