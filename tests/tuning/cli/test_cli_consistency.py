"""One option, one look: an option spelled the same in two commands shows the same metavar in both, and
--tracking-uri, --storage and --data say the same of what they accept everywhere; `make install` and the README's
manual install put in what `make demo` does. Parse-only."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

from tuning.cli.flag_owners import commands_of
from tuning.cli.main import build_parser
from tuning.cli.store_options import STORAGE_ACCEPTS, TRACKING_URI_HELP
from tuning.sweep_files import default_storage, default_storage_help


def _options() -> dict[str, list[tuple[str, argparse.Action]]]:
    """Every --option of every command: {'--storage': [('mamba-tune sweep', its action), ...]}."""
    found = defaultdict(list)
    for prog, parser in commands_of(build_parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    found[flag].append((prog, action))
    return found


def _metavar(action: argparse.Action) -> str | None:
    """The metavar --help shows: the action's, else its choices, else its dest in capitals; None for a switch."""
    if action.nargs == 0:
        return None
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper()


def test_an_option_in_two_commands_has_one_metavar():
    disagree = {flag: {prog: _metavar(action) for prog, action in uses}
                for flag, uses in _options().items() if len({_metavar(action) for _, action in uses}) > 1}
    assert not disagree, disagree


def test_tracking_uri_storage_and_data_say_the_same_of_what_they_accept():
    options = _options()
    assert len(options["--tracking-uri"]) >= 6 and len(options["--storage"]) >= 6 and len(options["--data"]) >= 3
    differ = [prog for prog, action in options["--tracking-uri"] if action.help != TRACKING_URI_HELP]
    storage_tail = f": {STORAGE_ACCEPTS} ({default_storage_help()})"  # where its default is the usual one
    differ += [prog for prog, action in options["--storage"]
               if f": {STORAGE_ACCEPTS} (" not in action.help
               or (action.default == default_storage() and not action.help.endswith(storage_tail))]
    data_tails = {prog: action.help.partition(": ")[2] for prog, action in options["--data"]}
    assert not differ and len(set(data_tails.values())) == 1, (differ, data_tails)


def test_tracking_uri_help_names_what_resolve_store_accepts():
    assert "http(s)://HOST:PORT" in TRACKING_URI_HELP and "sqlite:///FILE" in TRACKING_URI_HELP
    assert "no other scheme" in TRACKING_URI_HELP and "MLFLOW_TRACKING_URI" in TRACKING_URI_HELP


def test_make_install_and_the_readme_install_what_make_demo_does():
    root = Path(__file__).resolve().parents[3]
    makefile = (root / "Makefile").read_text()
    assert re.search(r"^install: \$\(STAMP\)$", makefile, re.M) and re.search(r"^demo: \$\(STAMP\)$", makefile, re.M)
    assert re.search(r"^\.PHONY:.* install\b", makefile, re.M)
    stamp_recipe = makefile.partition("$(STAMP): ")[2].partition("\n\n")[0]
    readme = (root / "README.md").read_text().partition("## Installing by hand")[2].partition("```\n\n")[0]
    extras = {re.findall(r"-e '\.\[([\w,]+)\]'", text)[0] for text in (stamp_recipe, readme)}
    assert extras == {"dev,bench,data"}, extras
