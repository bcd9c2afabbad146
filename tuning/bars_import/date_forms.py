"""What to do about CSV times not in ISO 8601: the --time-format they are in, told from the first block's texts.

13/02/2024 is day-first (no month 13), 02/13/2024 month-first; where no day in the first rows is past 12
(01/02/2024), either reading could be right, so both are named with the date each gives, and the choice is left to
the user: a guess would import wrong bars silently.
"""

from __future__ import annotations

import re
from datetime import date

_DAY_MONTH = re.compile(r"^\s*(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?:([ T])(\d{1,2}):(\d{2})(:\d{2})?)?\s*$")


def time_form_advice(texts: list[str]) -> str:
    """What to do about times not in ISO 8601, told from `texts` (the first block's): the --time-format they are in
    where day and month are told apart by a field past 12, both readings where no field is, else how to find it."""
    matches = [_DAY_MONTH.match(t) for t in texts]
    shapes = {(m.group(2), m.group(5), bool(m.group(8))) for m in matches if m}  # separator, 'T' or ' ', seconds
    if not texts or not all(matches) or len(shapes) != 1:
        return "give their strptime form, e.g. --time-format '%d.%m.%Y %H:%M'"
    separator, joint, seconds = shapes.pop()
    clock = f"{joint}%H:%M" + (":%S" if seconds else "") if joint else ""
    month_first = f"%m{separator}%d{separator}%Y{clock}"
    day_first = f"%d{separator}%m{separator}%Y{clock}"
    first_past_12 = next((m.group(0).strip() for m in matches if int(m.group(1)) > 12), None)
    second_past_12 = next((m.group(0).strip() for m in matches if int(m.group(3)) > 12), None)
    if first_past_12 and not second_past_12:
        return f"they are day-first ({first_past_12!r} has no month {int(first_past_12.split(separator)[0])}); " \
               f"give that form: --time-format '{day_first}'"
    if second_past_12 and not first_past_12:
        return f"they are month-first ({second_past_12!r} has no month {int(second_past_12.split(separator)[1])}); " \
               f"give that form: --time-format '{month_first}'"
    if first_past_12:
        return "no one order of day and month reads them all; export them in one form (ISO 8601: 2024-03-08)"
    example = matches[0]
    first, second, year = int(example.group(1)), int(example.group(3)), int(example.group(4))
    return (f"no day in the first rows is past 12, so day and month could be either: {example.group(0).strip()!r} "
            f"is {_day(year, month=first, day=second)} with --time-format '{month_first}' and "
            f"{_day(year, month=second, day=first)} with --time-format '{day_first}'; give the one your source uses")


def _day(year: int, month: int, day: int) -> str:
    """'8 March 2024', or 'no date' where the fields make none (31/04)."""
    try:
        return f"{day} {date(year, month, day):%B %Y}"
    except ValueError:
        return "no date"
