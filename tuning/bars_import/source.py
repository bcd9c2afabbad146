"""A file of bars, CSV or Parquet, streamed: only the mapped columns, only the chosen instrument's rows kept.

CSV is read with pyarrow.csv's streaming reader (a block at a time: a multi-GB file is never loaded whole), every
price and volume as float64; with --decimal , (European exports: 4512,25) as text whose decimal comma becomes a
point, and a '.' in such a number (a thousands separator) refused, never misread (decimal_comma.py). Its timestamp
column's form is told from the first block: integers (epochs), ISO 8601 with or without a UTC offset, or
--time-format. Text in any other form is refused, suggesting the form only where the first block settles it
(13/02/2024 is day-first, 02/13/2024 month-first; 01/02/2024 could be either, so both readings are named:
date_forms.py). A Date and a Time column (columns.py) are read as text, joined and parsed a block at a time. Times
with UTC offsets other than UTC's need --timezone: the one offset every row carries (+09:00), or the market's zone
where they change (daylight saving).
Errors name the row (0 = the first bar) and, for CSV, the file's line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from model.bars import FIELDS, DataError
from tuning.bars_import.columns import SYMBOL, TIME_OF_DAY, resolve_columns
from tuning.bars_import.date_forms import time_form_advice
from tuning.bars_import.decimal_comma import decimal_comma_advice, decimal_comma_floats

BLOCK = 4 << 20  # bytes of CSV parsed at a time
PARQUET_MAGIC = b"PAR1"
_INTEGER = re.compile(r"^\s*-?\d+\s*$")
_ISO = re.compile(r"^\s*\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?\s*$")
_CONVERSION = re.compile(r"In CSV column #(\d+): .*?invalid value '(.*)'")
_OFFSET = r"(Z|[+-]\d{2}:?\d{2})\s*$"  # a time's UTC offset, at its end
_UTC_OFFSETS = {"Z", "+00:00", "-00:00"}


@dataclass(frozen=True)
class Read:
    """The bars' columns, named by field (timestamp, open, ..., volume), of the chosen instrument; and how."""

    table: pa.Table
    form: str  # "csv" or "parquet"
    mapping: dict[str, str]  # field -> the source's column


@dataclass(frozen=True)
class Csv:
    """A CSV file and its delimiter (told from its header: a comma, semicolon, tab or bar)."""

    path: Path
    delimiter: str

    def open(self, convert: pcsv.ConvertOptions) -> pcsv.CSVStreamingReader:
        return pcsv.open_csv(self.path, read_options=pcsv.ReadOptions(block_size=BLOCK),
                             parse_options=pcsv.ParseOptions(delimiter=self.delimiter), convert_options=convert)


def is_parquet(path: Path) -> bool:
    with open(path, "rb") as stream:
        return stream.read(4) == PARQUET_MAGIC


def read_source(path: Path, given: dict[str, str], symbol: str | None, time_format: str | None,
                decimal: str = ".", timezone: str | None = None) -> Read:
    """The bars of `path` (CSV or Parquet), numbers with `decimal` as their decimal point (CSV), times with UTC
    offsets other than UTC's only with a `timezone`; DataError (one line) for anything that is not bars."""
    if is_parquet(path):
        if decimal != ".":
            raise DataError(f"--decimal {decimal}: {path} is a Parquet file, whose numbers are typed, the decimal "
                            "point is a CSV's; leave --decimal out")
        mapping = resolve_columns(str(path), _parquet_names(path), given)
        if TIME_OF_DAY in mapping:
            raise DataError(f"{path}: {_time_name(mapping)} split each bar's time, which `data import` joins in CSV "
                            "files only; give the Parquet one timestamp column: --column timestamp=NAME")
        batches, form = _parquet_batches(path, mapping), "parquet"
    else:
        csv = Csv(path, _delimiter(path))
        mapping = resolve_columns(str(path), _csv_names(csv), given)
        time_type, offsets = _csv_time_form(csv, mapping, time_format)
        if set(offsets) - _UTC_OFFSETS and timezone is None:
            raise _offsets_without_zone(csv, mapping)
        batches, form = _csv_batches(csv, mapping, time_type, time_format, decimal), "csv"
    return Read(_one_instrument(path, mapping, batches, symbol), form, mapping)


def _parquet_names(path: Path) -> list[str]:
    try:
        return pq.ParquetFile(path).schema_arrow.names
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({_first_line(exc)}); export it again") from None


def _parquet_batches(path: Path, mapping: dict[str, str]) -> Iterator[pa.RecordBatch]:
    try:
        for batch in pq.ParquetFile(path).iter_batches(columns=list(dict.fromkeys(mapping.values()))):
            yield pa.RecordBatch.from_arrays([batch.column(name) for name in mapping.values()], names=list(mapping))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: cannot read it ({_first_line(exc)}), the file is damaged; export it again") from None


def _delimiter(path: Path) -> str:
    """The delimiter the header line holds most of: a comma, semicolon, tab or bar (a comma where it holds none)."""
    with open(path, encoding="utf-8-sig", errors="replace") as stream:
        header = stream.readline()
    counts = {d: header.count(d) for d in ",;\t|"}
    return max(counts, key=counts.get) if any(counts.values()) else ","


def _csv_names(csv: Csv) -> list[str]:
    try:
        return csv.open(pcsv.ConvertOptions(include_columns=[])).schema.names
    except pa.ArrowInvalid as exc:
        if "Empty CSV file" in str(exc):
            raise DataError(f"{csv.path}: the file is empty, a CSV of bars starts with a header row; export it "
                            "again") from None
        raise _ragged(csv.path, exc) from None


def _csv_time_form(csv: Csv, mapping: dict[str, str], time_format: str | None) -> tuple[pa.DataType, tuple[str, ...]]:
    """How to read the CSV's time column (with its time-of-day column, where it has one), told from its first
    block: its Arrow type, and the UTC offsets the times carry (none: they carry none). DataError for text in no
    form read for sure."""
    path, name = csv.path, _time_name(mapping)
    texts = _first_block(csv, mapping["timestamp"])
    if TIME_OF_DAY in mapping:
        texts = [f"{d} {t}" if d is not None and t is not None else None
                 for d, t in zip(texts, _first_block(csv, mapping[TIME_OF_DAY]), strict=True)]
    texts = [t for t in texts if t is not None][:2000]
    if time_format is not None:
        return pa.timestamp("ns", tz="UTC" if "%z" in time_format else None), ()
    if texts and all(_INTEGER.match(t) for t in texts) and TIME_OF_DAY not in mapping:
        return pa.int64(), ()
    odd = next((t for t in texts if not _ISO.match(t)), None)
    if odd is not None:
        raise DataError(f"{path}: times like {odd.strip()!r} in {name} are not ISO 8601 (2024-03-08 or "
                        f"2024-03-08 09:30:00); {time_form_advice(texts)}")
    offsets = tuple(sorted({_offset(m.group(4)) for t in texts if (m := _ISO.match(t)) and m.group(4)}))
    return pa.timestamp("ns", tz="UTC" if offsets else None), offsets


def _offset(text: str) -> str:
    """A UTC offset as a zone is named: 'Z' -> '+00:00', '+0900' -> '+09:00'."""
    text = text.strip()
    return "+00:00" if text == "Z" else text if ":" in text else f"{text[:3]}:{text[3:]}"


def _offsets_without_zone(csv: Csv, mapping: dict[str, str]) -> DataError:
    """The refusal of times that carry UTC offsets but no zone: the offset to name where every row of the file has
    the one (a fixed-offset zone), else the market's zone (offsets that change with daylight saving)."""
    name, offsets = _time_name(mapping), set()
    columns = [mapping["timestamp"], *([mapping[TIME_OF_DAY]] if TIME_OF_DAY in mapping else [])]
    reader = csv.open(pcsv.ConvertOptions(include_columns=columns, column_types=dict.fromkeys(columns, pa.string())))
    for batch in reader:  # every row's, not just the first block's: a winter's offset is not a summer's
        texts = batch.column(columns[-1])
        found = pc.extract_regex(texts, _OFFSET.replace("(", "(?P<offset>", 1)).field("offset")
        offsets.update(_offset(o) for o in pc.unique(found).to_pylist() if o is not None)
    if len(offsets) == 1:
        (offset,) = offsets
        flag = f"--timezone {offset}" if offset.startswith("+") else f"--timezone={offset}"  # -05:00 is no flag
        return DataError(f"{csv.path}: every time in {name} carries the UTC offset {offset}, and time-of-day "
                         f"features need the bars' clock named; name it: {flag}")
    return DataError(f"{csv.path}: times in {name} carry UTC offsets ({', '.join(sorted(offsets))}), which change "
                     "with daylight saving and name no zone, and time-of-day features need the market's clock; name "
                     "the market's zone, e.g. --timezone America/New_York")


def _first_block(csv: Csv, name: str) -> list[str | None]:
    reader = csv.open(pcsv.ConvertOptions(include_columns=[name], column_types={name: pa.string()}))
    try:
        return reader.read_next_batch().column(0).to_pylist()
    except StopIteration:
        return []


def _csv_batches(csv: Csv, mapping: dict[str, str], time_type: pa.DataType, time_format: str | None,
                 decimal: str = ".") -> Iterator[pa.RecordBatch]:
    split = TIME_OF_DAY in mapping  # a Date and a Time column: read as text, joined, then parsed
    numbers = [field for field in mapping if field in FIELDS[1:]]
    types = {mapping[f]: pa.float64() if decimal == "." else pa.string() for f in numbers}
    types |= {mapping[f]: pa.string() for f in (SYMBOL, TIME_OF_DAY) if f in mapping}
    types[mapping["timestamp"]] = pa.string() if split else time_type
    convert = pcsv.ConvertOptions(include_columns=list(dict.fromkeys(mapping.values())), column_types=types,
                                  timestamp_parsers=[time_format] if time_format else None)
    fields, rows = [f for f in mapping if f != TIME_OF_DAY], 0
    try:
        for batch in csv.open(convert):
            columns = {f: batch.column(mapping[f]) for f in fields}
            if decimal != ".":
                columns |= {f: decimal_comma_floats(csv.path, mapping[f], columns[f], rows) for f in numbers}
            if split:
                joined = pc.binary_join_element_wise(columns["timestamp"], batch.column(mapping[TIME_OF_DAY]), " ")
                columns["timestamp"] = _parsed(csv.path, _time_name(mapping), joined, time_type, time_format, rows)
            yield pa.RecordBatch.from_arrays(list(columns.values()), names=fields)
            rows += batch.num_rows
    except pa.ArrowInvalid as exc:
        if "CSV parse error" in str(exc):
            raise _ragged(csv.path, exc) from None
        raise _conversion(csv, exc, _csv_names(csv), mapping, time_format) from None  # #k: the file's k-th column


def _time_name(mapping: dict[str, str]) -> str:
    """The time column as errors name it: 'Date', or 'Date' and 'Time' where a time-of-day column joins it."""
    name = repr(mapping["timestamp"])
    return f"columns {name} and {mapping[TIME_OF_DAY]!r}" if TIME_OF_DAY in mapping else f"column {name}"


def _parsed(path: Path, name: str, texts: pa.Array, time_type: pa.DataType, time_format: str | None,
            first_row: int) -> pa.Array:
    """Date-and-time texts as times of `time_type`; a text in another form is refused, naming its row."""
    if time_format is not None:
        times = pc.strptime(texts, format=time_format, unit="ns", error_is_null=True).cast(time_type)
    else:
        times = pc.cast(texts, time_type, safe=False) if _all_parse(texts, time_type) else None
    bad = pc.and_(pc.is_null(times), pc.is_valid(texts)) if times is not None else None
    if times is None or pc.any(bad).as_py():
        row = _first_unparsed(texts, time_type) if times is None else int(pc.index(bad, True).as_py())
        form = f"the form --time-format {time_format!r} gives" if time_format else "the form of the first rows"
        raise DataError(f"{path}: row {first_row + row} (line {first_row + row + 2}) of {name} is "
                        f"{texts[row].as_py()!r}, not a time of {form}, every time must have one form; fix that row")
    return times


def _all_parse(texts: pa.Array, time_type: pa.DataType) -> bool:
    try:
        pc.cast(texts, time_type)
    except pa.ArrowInvalid:
        return False
    return True


def _first_unparsed(texts: pa.Array, time_type: pa.DataType) -> int:
    for row, text in enumerate(texts.to_pylist()):
        if text is not None and not _all_parse(pa.array([text]), time_type):
            return row
    return 0


def _one_instrument(path: Path, mapping: dict[str, str], batches: Iterator[pa.RecordBatch],
                    symbol: str | None) -> pa.Table:
    """The batches' rows of instrument `symbol` as one table (no symbol column); all rows where the file has none.
    Several instruments and no --symbol, or a --symbol the file does not hold, are refused naming those it holds."""
    if SYMBOL not in mapping:
        if symbol is not None:
            raise DataError(f"--symbol {symbol}: {path} has no symbol column (symbol, ticker or instrument), it holds "
                            "one instrument's bars; leave --symbol out, or map the column: --column symbol=NAME")
        return _table(path, list(batches))
    kept, seen = [], set()
    for batch in batches:
        symbols = batch.column(SYMBOL).cast(pa.string())  # a Parquet's may be dictionary-encoded, or numbers
        seen.update(s for s in pc.unique(symbols).to_pylist() if s is not None)
        if symbol is not None:
            kept.append(batch.filter(pc.equal(symbols, symbol)))
        else:
            kept.append(batch)
    listed = ", ".join(sorted(seen)[:10]) + (f" and {len(seen) - 10} more" if len(seen) > 10 else "")
    if symbol is None and len(seen) > 1:
        raise DataError(f"{path}: column {mapping[SYMBOL]!r} names {len(seen)} instruments ({listed}), bars are of "
                        f"one instrument; pick one: --symbol {sorted(seen)[0]}")
    if symbol is not None and symbol not in seen:
        raise DataError(f"--symbol {symbol}: {path} holds no bars of {symbol} (its instruments: {listed or 'none'}), "
                        "the symbol must be one of them; pick one of those")
    return _table(path, kept)


def _table(path: Path, batches: list[pa.RecordBatch]) -> pa.Table:
    if not sum(batch.num_rows for batch in batches):
        raise DataError(f"{path}: no bars below the header, bars are needed; export the file with its rows")
    table = pa.Table.from_batches(batches)
    return table.select([field for field in FIELDS if field in table.column_names])  # volume where the file has it


def _ragged(path: Path, exc: Exception) -> DataError:
    match = re.search(r"Expected (\d+) columns, got (\d+): (.*)", str(exc))
    if match is None:
        return DataError(f"{path}: not a CSV file pyarrow can parse ({_first_line(exc)}); export it again as CSV")
    expected, got, text = match.groups()
    line = _line_of(path, text)
    return DataError(f"{path}: line {line} has {got} fields where the header has {expected}, every row needs one "
                     "value per column; fix or drop that line")


def _conversion(csv: Csv, exc: Exception, names: list[str], mapping: dict[str, str],
                time_format: str | None) -> DataError:
    path, match = csv.path, _CONVERSION.search(str(exc))
    if match is None:
        return DataError(f"{path}: cannot read it as CSV ({_first_line(exc)}); export it again")
    index, value = int(match.group(1)), match.group(2)
    name = names[index] if index < len(names) else "?"
    row = _row_of(csv, name, value)
    where = f"{path}: column {name!r} at row {row} (line {row + 2})" if row is not None else f"{path}: column {name!r}"
    if name == mapping["timestamp"]:
        form = f"the form --time-format {time_format!r} gives" if time_format else "the form of the first rows"
        return DataError(f"{where} is {value!r}, not a time of {form}, every time must have one form; fix that row")
    if (comma := decimal_comma_advice(value, csv.delimiter)) is not None:
        return DataError(f"{where} is {value!r}, {comma}")
    return DataError(f"{where} is {value!r}, not a number, prices and volume must be numbers; fix or drop that row")


def _row_of(csv: Csv, name: str, value: str) -> int | None:
    """The first row (0: the first bar) whose column `name` is the text `value`; None if not found."""
    reader = csv.open(pcsv.ConvertOptions(include_columns=[name], column_types={name: pa.string()},
                                          strings_can_be_null=False))
    rows = 0
    for batch in reader:
        hits = pc.equal(batch.column(0), value)
        if pc.any(hits).as_py():
            return rows + int(pc.index(hits, True).as_py())
        rows += batch.num_rows
    return None


def _line_of(path: Path, text: str) -> int | str:
    """The line number (1: the header) of the first line that is `text`; '?' if none is."""
    with open(path, encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if line.rstrip("\r\n") == text:
                return number
    return "?"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
