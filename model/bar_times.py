"""Bar timestamps: instants as int64 nanoseconds since the epoch (UTC), and the zone of the market's clock.

A timestamp column is one of:
  timestamp with a zone    instants; the zone is the bars' clock (America/New_York: the session's own hours; or a
                           fixed offset, +09:00, for a market that keeps no daylight saving)
  timestamp without one    wall-clock times, taken as UTC (`mamba-tune data import --timezone` says otherwise)
  date                     midnight UTC of each day
  integer                  an epoch count in s, ms, us or ns. The unit is never guessed: given, or the only one that
                           puts every value in EPOCH_YEARS. The year 1970 is left out of that range: a finer unit puts
                           every coarser count in 1970 (1.7e12 ms is 2023; as us it is January 1970), so with it
                           every file would fit several units. Bars from 1970 as integers need their unit given.
Time-of-day features read the bars' clock (`local_clock_ns`), so a session that opens at 09:30 New York time opens
at the same feature value either side of a daylight-saving change.
"""

from __future__ import annotations

import zoneinfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UTC = "UTC"
EPOCH_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}  # unit -> nanoseconds per count
EPOCH_YEARS = (1971, 2100)  # an assumed unit must put every bar in [1971-01-01, 2100-01-01)
_RANGE_NS = (31_536_000 * 10**9, 4_102_444_800 * 10**9)  # those two instants, ns since the epoch


def epoch_units_that_fit(low: int, high: int) -> list[str]:
    """The units that put every count in [low, high] within EPOCH_YEARS; at most one (the ranges do not overlap)."""
    return [unit for unit, ns in EPOCH_UNITS.items()
            if _RANGE_NS[0] <= low * ns and high * ns < _RANGE_NS[1]]


def epoch_unit_of(counts: np.ndarray) -> str:
    """The one unit that puts every count of (n,) int64 `counts` within EPOCH_YEARS; ValueError (`what, rule` of
    the counts) where none does (at most one can)."""
    low, high = int(counts.min()), int(counts.max())
    units = epoch_units_that_fit(low, high)
    if len(units) != 1:
        raise ValueError(f"holds integers {low:,} .. {high:,}, which no epoch unit (s, ms, us, ns) puts within "
                         f"{EPOCH_YEARS[0]}-{EPOCH_YEARS[1]}, integer timestamps need a unit that does")
    return units[0]


def epochs_to_ns(values: np.ndarray, unit: str) -> np.ndarray:
    """(n,) int64 epoch counts in `unit` -> (n,) int64 ns; ValueError past the range of int64 nanoseconds."""
    scale, limit = EPOCH_UNITS[unit], np.iinfo(np.int64)
    if len(values) and (values.max() > limit.max // scale or values.min() < limit.min // scale):
        raise ValueError("past the range of nanosecond timestamps (years 1677-2262)")
    return values * scale if scale != 1 else values


def valid_zone(name: str) -> bool:
    """Whether `name` is a zone of the IANA database (America/New_York, UTC) or a fixed offset (+01:00)."""
    if _is_offset(name):
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def local_clock_ns(timestamp_ns: np.ndarray, zone: str) -> np.ndarray:
    """(n,) int64 ns instants -> (n,) int64 ns of the wall clock in `zone` (the instant plus the zone's offset then)."""
    if zone == UTC:
        return timestamp_ns
    instants = pa.array(timestamp_ns, type=pa.timestamp("ns", tz=zone))
    return pc.local_timestamp(instants).to_numpy(zero_copy_only=False).view(np.int64)


def _is_offset(name: str) -> bool:
    """Whether `name` is a fixed UTC offset as Arrow reads a zone: +HH:MM, hours below 24 and minutes below 60."""
    return (len(name) == 6 and name[0] in "+-" and name[3] == ":" and (name[1:3] + name[4:]).isdigit()
            and int(name[1:3]) < 24 and int(name[4:]) < 60)
