"""The search spaces shipped with mamba-tune, and the one rule that turns a `--space` value into a file.

The spaces are the YAMLs of the repository's search_spaces/, installed with the code as the package `search_spaces`
(pyproject.toml's package data), so `--space smoke` finds the same file in a checkout, an installed wheel and an
image. The rule: a value with a path separator or a .yaml/.yml suffix is a path; any other is a shipped space's name.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from tuning.errors import UsageError

PACKAGE = "search_spaces"  # search_spaces/ of the repository, a package in the wheel
SUFFIXES = (".yaml", ".yml")


def shipped_spaces() -> dict[str, Path]:
    """{name: file} of every shipped space, e.g. {"smoke": .../search_spaces/smoke.yaml}."""
    folder = Path(str(resources.files(PACKAGE)))  # a folder on disk: pip unpacks a wheel, never imports it zipped
    return {path.stem: path for path in sorted(folder.iterdir()) if path.suffix == ".yaml"}


def space_path(value: str) -> Path:
    """`--space VALUE` -> the YAML file it names: a path as given, or the shipped space of that name."""
    if os.sep in value or "/" in value or value.endswith(SUFFIXES):
        return Path(value)
    shipped = shipped_spaces()
    if value not in shipped:
        raise UsageError(f"no shipped search space named {value!r}, a name without '/' or .yaml picks one of "
                         f"{', '.join(shipped)}; name one of them, or give your YAML file's path (./{value}.yaml)")
    return shipped[value]
