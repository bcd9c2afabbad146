"""Numbers written with a decimal comma (European exports: 4512,25): read where --decimal , says so, and named where
a CSV holds them unsaid. A '.' in such a number (1.234,5) would be a thousands separator: refused, never guessed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from model.bars import DataError

DECIMALS = (".", ",")  # the decimal points --decimal may name
_NULL_SPELLINGS = pa.array(pcsv.ConvertOptions().null_values)  # the texts a CSV reads as missing (empty, NA, null...)
_DECIMAL_COMMA = re.compile(r"^\s*[+-]?\d+,(\d+)\s*$")  # 4512,25: a number with a decimal comma (or a thousands one)


def decimal_comma_floats(path: Path, name: str, texts: pa.Array, first_row: int) -> pa.Array:
    """(n_rows,) string -> (n_rows,) float64: a column of numbers written with a decimal comma (4512,25) read; a '.'
    in one (1.234,5: a thousands separator) or any other text is refused naming its row (first_row: the block's
    first bar). Empty cells (and NA, null...) stay missing."""
    texts = pc.utf8_trim_whitespace(texts)
    texts = pc.if_else(pc.is_in(texts, value_set=_NULL_SPELLINGS), pa.scalar(None, pa.string()), texts)
    points = pc.match_substring(texts, ".")
    if pc.any(points).as_py():
        row = int(pc.index(points, True).as_py())
        raise DataError(f"{path}: column {name!r} at row {first_row + row} (line {first_row + row + 2}) is "
                        f"{texts[row].as_py()!r}, a '.' in a number whose decimal point is ',' (--decimal ,) would "
                        "be a thousands separator, which is never guessed; if '.' is the decimal point, leave "
                        "--decimal out, else export the numbers without a thousands separator")
    dotted = pc.replace_substring(texts, ",", ".")
    try:
        return pc.cast(dotted, pa.float64())
    except pa.ArrowInvalid:
        row = next(row for row, text in enumerate(dotted.to_pylist()) if text is not None and not _is_number(text))
        raise DataError(f"{path}: column {name!r} at row {first_row + row} (line {first_row + row + 2}) is "
                        f"{texts[row].as_py()!r}, not a number, prices and volume must be numbers; fix or drop that "
                        "row") from None


def _is_number(text: str) -> bool:
    try:
        pc.cast(pa.array([text]), pa.float64())
    except pa.ArrowInvalid:
        return False
    return True


def decimal_comma_advice(value: str, delimiter: str) -> str | None:
    """What a CSV's number `value` that failed to read as one is, when it has a decimal comma (4512,25) in a file
    not delimited by commas, and the flag that reads it; None for any other text."""
    comma = _DECIMAL_COMMA.match(value)
    if comma is None or delimiter == ",":
        return None
    maybe = " or a thousands separator" if len(comma.group(1)) == 3 else ""
    return (f"a number written with a decimal comma{maybe}, which is read only when said; if ',' is the decimal "
            "point, read the numbers so: --decimal ,")
