"""Synthetic ES-like futures bars: 5-minute bars, deterministic from a seed.

What makes them ES-like: a price level near 5000 on a 0.25 tick; returns of about 6 bp
per bar; volatility clustering (log-volatility follows a persistent AR(1) with a spread of
0.4, so calm and busy stretches last); a U-shaped intraday profile of volatility and
volume (busy open and close, quiet midday); fat-tailed returns (Student-t, 4 degrees of
freedom); overnight gaps; sessions of 120 bars (10 hours; up to 288) on weekdays only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

BARS_PER_DAY = 120  # 10 hours of 5-minute bars, as 21,600 bars = 180 days in the original system
BAR_NS = 5 * 60 * 10**9
SESSION_OPEN_NS = (13 * 3600 + 30 * 60) * 10**9  # 13:30 UTC
TICK = 0.25
_DAY_NS = 86_400 * 10**9
_START_NS = 1_704_067_200 * 10**9  # 2024-01-01 00:00 UTC, a Monday


def synth_bars(n_bars: int = 21_600, seed: int = 0, price: float = 5000.0,
               bars_per_day: int = BARS_PER_DAY, start_ns: int = _START_NS) -> pa.Table:
    """A table of n_bars bars: timestamp (ns, UTC), open, high, low, close, volume; the first session on the
    Monday `start_ns` (midnight UTC; default 2024-01-01)."""
    if n_bars < 1:
        raise ValueError(f"n_bars must be at least 1, got {n_bars}")
    if start_ns % _DAY_NS or (start_ns // _DAY_NS + 3) % 7:  # 1970-01-01 was a Thursday
        raise ValueError("the bars start on a Monday at midnight UTC")
    if not 1 <= bars_per_day <= 288:
        raise ValueError(f"bars_per_day must be between 1 and 288 (24 hours of 5-minute bars), got {bars_per_day}")
    last_day = (n_bars - 1) // bars_per_day
    if start_ns + (last_day // 5 * 7 + 6) * _DAY_NS > np.iinfo(np.int64).max:
        raise ValueError(f"{n_bars:,} bars at {bars_per_day} a day run past 2262, the end of nanosecond "
                         "timestamps; use more bars per day (e.g. 276, ES's 23-hour session)")
    rng = np.random.default_rng(seed)
    slot = np.arange(n_bars) % bars_per_day  # position in the session
    profile = _intraday_profile(slot, bars_per_day)  # (n,) around 1, U-shaped

    # Volatility: log-volatility AR(1) (stationary sd 0.04 / sqrt(1 - 0.995^2) = 0.4), about 6 bp a bar.
    log_vol = _ar1(rng.standard_normal(n_bars) * 0.04, phi=0.995)
    sigma = 6e-4 * np.exp(log_vol - 0.08) * profile  # per-bar return std (exp(-0.08) undoes E[exp(log_vol)])
    shocks = rng.standard_t(4, n_bars) / np.sqrt(2.0)  # unit variance, fat tails
    returns = sigma * shocks
    overnight = (slot == 0) * rng.standard_normal(n_bars) * 4e-3  # gaps between sessions
    log_close = np.log(price) + np.cumsum(returns + overnight)
    close = _to_tick(np.exp(log_close))
    open_ = np.empty(n_bars)
    open_[0] = _to_tick(np.asarray([price]))[0]
    open_[1:] = np.where(slot[1:] == 0, _to_tick(close[:-1] * np.exp(overnight[1:])), close[:-1])
    body_top, body_bottom = np.maximum(open_, close), np.minimum(open_, close)
    reach = np.abs(rng.standard_normal((2, n_bars))) * sigma * close * 0.8  # intrabar excursions
    high = np.ceil((body_top + reach[0]) / TICK) * TICK
    low = np.maximum(np.floor((body_bottom - reach[1]) / TICK) * TICK, TICK)

    volume = np.round(900 * profile**1.5 * np.exp(0.35 * rng.standard_normal(n_bars)) * (1 + 2 * np.abs(shocks)))
    return pa.table({
        "timestamp": pa.array(_timestamps(n_bars, bars_per_day, start_ns), type=pa.timestamp("ns", tz="UTC")),
        "open": open_, "high": high, "low": low, "close": close, "volume": volume.astype(np.int64),
    })


def _intraday_profile(slot: np.ndarray, bars_per_day: int) -> np.ndarray:
    """U shape over the session: about 1.8 at the open and close, 0.7 at midday."""
    x = slot / max(bars_per_day - 1, 1) * 2 - 1  # -1 at the open, +1 at the close
    return 0.7 + 1.1 * x**4


def _ar1(noise: np.ndarray, phi: float, block: int = 256) -> np.ndarray:
    """x_t = phi x_{t-1} + noise_t, vectorised in blocks (phi^-block stays finite)."""
    out = np.empty_like(noise)
    powers = phi ** np.arange(block)
    carry = 0.0
    for start in range(0, len(noise), block):
        chunk = noise[start:start + block]
        p = powers[: len(chunk)]
        out[start:start + len(chunk)] = p * (carry * phi + np.cumsum(chunk / p))
        carry = out[start + len(chunk) - 1]
    return out


def _to_tick(prices: np.ndarray) -> np.ndarray:
    return np.maximum(np.round(prices / TICK) * TICK, TICK)


def next_monday(after_ns: int) -> int:
    """Midnight UTC of the first Monday after `after_ns` (int64 ns): where bars that follow others start."""
    day = after_ns // _DAY_NS + 1
    return int((day + (4 - day) % 7) * _DAY_NS)  # day 4 of the epoch (1970-01-05) was a Monday


def _timestamps(n_bars: int, bars_per_day: int, start_ns: int) -> np.ndarray:
    """Session bars on weekdays from the Monday `start_ns`: int64 ns."""
    day, slot = np.divmod(np.arange(n_bars), bars_per_day)
    week, weekday = np.divmod(day, 5)
    calendar_day = week * 7 + weekday
    return start_ns + calendar_day * _DAY_NS + SESSION_OPEN_NS + slot * BAR_NS
