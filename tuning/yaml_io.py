"""YAML reading for configs: safe, with 1e-5 read as a number, errors as one ConfigError line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from model.errors import InputError


class ConfigError(InputError, ValueError):
    """A configuration file or value that cannot be used: one line, with what to change."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (1e-5), as YAML 1.2 does."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error becomes a ConfigError naming `source` and the line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{source}: invalid YAML{where} ({getattr(exc, 'problem', None) or exc}); "
                          "fix the syntax") from None


def read_yaml(path: str | Path, what: str) -> Any:
    """Read and parse a YAML file; unreadable or invalid files are ConfigErrors."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror}); check the path") from None
    return parse_yaml(text, str(path))
