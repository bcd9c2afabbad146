"""The nearest known names to an unknown key, for the one line that refuses it: "did you mean train.lr?".

A key is matched on its whole dotted name (difflib's ratio, as `train.lr` to `train.lrr`) and on its last part (a
bare `d_model` is `model.d_model`), those of its own section, or of the nearest (`schedulr.max_epochs`:
`scheduler.max_epochs`), first; where nothing is near, the line says where every key is listed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

LISTED_BY = "`mamba-tune space keys` lists every setting by its dotted name"
MOST = 3  # names suggested at most
WHOLE_CUTOFF = 0.8  # difflib's ratio a whole dotted name needs (a shared section's name alone scores about 0.7)
PART_CUTOFF = 0.6  # difflib's ratio a name's last part needs


def nearest(key: str, names: Iterable[str], aliases: Mapping[str, str] | None = None) -> list[str]:
    """Up to MOST of `names` nearest to `key`: the setting its last dotted part is a short name of, those whose last
    part is the key's, then the closest whole names, then those whose last part is closest to the key's."""
    names = list(dict.fromkeys(names))
    last = key.rsplit(".", 1)[-1]
    by_last: dict[str, list[str]] = {}
    for name in names:
        by_last.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    aliases = aliases or {}  # {short name: dotted name}, e.g. learning_rate: train.lr
    found = [aliases[short] for short in difflib.get_close_matches(last, list(aliases), n=1, cutoff=PART_CUTOFF)
             if aliases[short] in names]  # train.learning_rate, train.learnin_rate: train.lr
    found += [name for name in names if name != key and name.rsplit(".", 1)[-1] == last]
    found += difflib.get_close_matches(key, names, n=MOST, cutoff=WHOLE_CUTOFF)
    for part in difflib.get_close_matches(last, list(by_last), n=MOST, cutoff=PART_CUTOFF):
        found += by_last[part]
    found = [name for name in dict.fromkeys(found) if name != key]
    section = key.rsplit(".", 1)[0] if "." in key else None
    same = [name for name in found if section and name.startswith(section + ".")]  # scheduler.max_epoch: its section's
    near = [name for name in found if section and "." in name and difflib.SequenceMatcher(
        None, section, name.rsplit(".", 1)[0]).ratio() >= PART_CUTOFF]  # schedulr.max_epochs: scheduler's
    return (same or near or found)[:MOST]


def did_you_mean(key: str, names: Iterable[str], aliases: Mapping[str, str] | None = None,
                 listed_by: str = LISTED_BY) -> str:
    """'did you mean model.d_model?' (or 'did you mean a, b or c?'); where no name is near, `listed_by`."""
    found = nearest(key, names, aliases)
    if not found:
        return listed_by
    return "did you mean " + (found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}") + "?"
