"""A parsed search space written out whole: every setting, defaults filled in, as YAML that parse_space reads back
to an equal SweepSpace (`mamba-tune space show`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from tuning.search.recipe import SECTIONS
from tuning.search.searchable import resolve
from tuning.search.space import FIXED_WHILE_SEARCHED, SweepSpace
from tuning.search.space_keys import plain, refused_keys


def effective_values(space: SweepSpace) -> dict[str, Any]:
    """The space's every setting as plain values, in SweepSpace's order. Search entries by their to_dict() (their
    fields without the unset ones where they have none); sections whole, None included (confirm: null is no
    confirmation); the run settings as the top-level data, model and train sections, without those the sweep sets
    itself and a space may not (train.epochs) and without those it searches (a setting both fixed and searched is
    refused); a webhook URL, a secret, by its host alone (read back, it is refused: give it by --notify or
    MAMBA_TUNE_WEBHOOK)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(space):
        value = getattr(space, field.name)
        if field.name == "search":
            values["search"] = {name: _entry(spec) for name, spec in value.items()}
        elif field.name == "run":
            values.update(_run(value, space.search))
        elif field.name == "notify" and value is not None:  # a secret is never printed: its host alone, which no
            values["notify"] = {"webhook": f"<not shown: a secret, to {value.host}>"}  # sweep takes for a URL
        else:
            values[field.name] = plain(value)
    return values


def effective_yaml(space: SweepSpace, source: str) -> str:
    """The YAML of effective_values under a header naming where it came from and the command that runs it."""
    body = yaml.dump(effective_values(space), Dumper=_Dumper, sort_keys=False, width=120)
    return (f"# The search space {source}\n# with every setting written out (mamba-tune space show). Run it with:\n"
            f"#   mamba-tune sweep --data BARS.parquet --space THIS.yaml\n{body}")


class _Dumper(yaml.SafeDumper):
    """SafeDumper writing a list of plain values on one line: choices: [64, 128], not one item a line."""


def _list(dumper: yaml.SafeDumper, items: list) -> yaml.Node:
    flat = all(not isinstance(item, (dict, list)) for item in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flat)


_Dumper.add_representer(list, _list)


def _entry(spec: Any) -> Any:
    if hasattr(spec, "to_dict"):
        return plain(spec.to_dict())
    return {key: plain(value) for key, value in dataclasses.asdict(spec).items() if value is not None}


def _run(run: Any, search: dict[str, Any]) -> dict[str, Any]:
    searched = {resolve(key).name for key in search} - set(FIXED_WHILE_SEARCHED)
    left_out = {*refused_keys(), *searched}
    return {section: {key: value for key, value in plain(getattr(run, section)).items()
                      if f"{section}.{key}" not in left_out} for section in SECTIONS}
