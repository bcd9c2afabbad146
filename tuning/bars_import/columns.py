"""Which of a file's columns holds each bar field: the user's --column mapping, else the common spellings.

Spellings are matched in any case, with spaces, dashes and underscores alike ("Adj Close" is adj_close). "Adj Close"
is the close only where a file has no Close: with both (Yahoo's export), Close is the one within each bar's range.
A Date and a Time column side by side (MetaTrader's, TradeStation's and NinjaTrader's exports) are one timestamp: the
timestamp is Date, and the time field is Time, whose times of day are joined to its dates.
Volume is optional: a file without a volume column (and no --column volume=NAME) has none, and nothing stands in
for it.
"""

from __future__ import annotations

import difflib
import re

from model.bars import FIELDS, OPTIONAL_FIELDS, SYMBOL_COLUMNS, DataError

SYMBOL = "symbol"  # the optional field: each bar's instrument
TIME_OF_DAY = "time"  # the optional field: a column of times of day, joined to the timestamp column's dates
SPELLINGS = {  # field -> its spellings, each a candidate of equal standing
    "timestamp": ("timestamp", "datetime", "date", "time", "date_time", "ts", "ts_event", "time_stamp"),
    "open": ("open", "open_price"),
    "high": ("high", "high_price"),
    "low": ("low", "low_price"),
    "close": ("close", "close_price", "last"),
    "volume": ("volume", "vol"),
    SYMBOL: SYMBOL_COLUMNS,
}
FALLBACKS = {"close": ("adj_close", "adjclose", "adjusted_close")}  # matched only where no spelling above is


def normal(name: str) -> str:
    """A column name as spellings are matched: lower case, spaces and dashes as underscores."""
    return re.sub(r"[\s\-_]+", "_", name.strip().lower())


def resolve_columns(source: str, names: list[str], given: dict[str, str]) -> dict[str, str]:
    """Field -> the file's column (symbol and volume included where the file has one), from `given` (--column) and
    the spellings; a DataError names what is missing, ambiguous or mapped to a column the file lacks."""
    allowed = (*FIELDS, SYMBOL, TIME_OF_DAY)
    for field, name in given.items():
        if field not in allowed:
            raise DataError(f"--column {field}={name}: {field!r} is not a bar field, a mapping names one of "
                            f"{', '.join(allowed)}; e.g. --column timestamp=Date")
        if name not in names:
            raise DataError(f"--column {field}={name}: {source} has no column {name!r} (it has {_listed(names)}), a "
                            f"mapping must name one of its columns; fix the name")
    mapping = dict(given)
    if "timestamp" not in mapping and TIME_OF_DAY not in mapping:
        mapping |= _date_and_time(names)
    for field in (*FIELDS, SYMBOL):
        if field not in mapping and (found := _spelled(source, field, names, set(mapping.values()))) is not None:
            mapping[field] = found
    required = [field for field in FIELDS if field not in OPTIONAL_FIELDS]
    missing = [field for field in required if field not in mapping]
    if missing:
        field = missing[0]
        unclaimed = [n for n in names if n not in mapping.values()]
        likely = difflib.get_close_matches(field, unclaimed, n=1, cutoff=0.5) or ["NAME"]  # never a guess
        raise DataError(f"{source}: no column for {field} (the file has {_listed(names)}), bars need "
                        f"{', '.join(required)}; map the column that holds it: --column {field}={likely[0]}")
    shared = [name for name in mapping.values() if list(mapping.values()).count(name) > 1]
    if shared:
        fields = [f for f, name in mapping.items() if name == shared[0]]
        raise DataError(f"{source}: fields {' and '.join(fields)} both map to column {shared[0]!r}, each field needs "
                        "its own column; fix the --column mapping")
    return mapping


def _date_and_time(names: list[str]) -> dict[str, str]:
    """{timestamp: Date, time: Time} where the file has a column named date and one named time and no other column
    spelled as a timestamp; else {}."""
    spelled = [n for n in names if normal(n) in SPELLINGS["timestamp"]]
    dates, times = [n for n in spelled if normal(n) == "date"], [n for n in spelled if normal(n) == "time"]
    if len(spelled) == 2 and len(dates) == 1 and len(times) == 1:
        return {"timestamp": dates[0], TIME_OF_DAY: times[0]}
    return {}


def _spelled(source: str, field: str, names: list[str], taken: set[str]) -> str | None:
    """The one column spelled as `field` is (its fallbacks only where none is); None if none is."""
    for spellings in (SPELLINGS[field], FALLBACKS.get(field, ())):
        found = [n for n in names if normal(n) in spellings and n not in taken]
        if len(found) > 1:
            raise DataError(f"{source}: columns {' and '.join(repr(n) for n in found)} could each be the {field}, "
                            f"one column is the {field}; name it: --column {field}={found[0]}")
        if found:
            return found[0]
    return None


def _listed(names: list[str]) -> str:
    return ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "") if names else "none"
