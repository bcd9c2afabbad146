"""`mamba-tune space keys | show`: the keys a search space accepts, and a space with every default filled in."""

from __future__ import annotations

import argparse

from tuning.cli.help import subcommand
from tuning.search.effective_space import effective_yaml
from tuning.search.overrides import described, parse_sets, with_sets
from tuning.search.shipped_spaces import space_path
from tuning.search.space import default_name, parse_space
from tuning.search.space_keys import refused_keys, space_keys
from tuning.search.space_keys_page import keys_markdown, keys_table
from tuning.yaml_io import read_yaml


def add_commands(commands: argparse._SubParsersAction) -> None:
    space = subcommand(commands, "space", "list the keys a search space accepts, or show a space whole",
                        ("mamba-tune space keys", "mamba-tune space show smoke"),
                        "List every key a search-space YAML accepts (its type, default, bounds, whether it can be "
                        "searched and what it means, all read from the code), or show a space with every default "
                        "filled in, as a sweep reads it.")
    sub = space.add_subparsers(dest="space_command", required=True, parser_class=type(space))
    keys = subcommand(sub, "keys", "list every key a search space accepts",
                      ("mamba-tune space keys", "mamba-tune space keys --markdown > docs/space-keys.md"),
                      "List every key a search-space YAML accepts: its type, its default, its bounds where the code "
                      "keeps them, the name under `search:` that searches it (marked `(moves samples)` where its "
                      "values cut different samples, which the sweep then aligns on the longest), and its meaning "
                      "(the comment on its field in the dataclass that reads it).")
    keys.add_argument("--markdown", action="store_true",
                      help="print the Markdown page docs/space-keys.md instead of the table (make docs writes it)")
    keys.set_defaults(run=cmd_keys)
    show = subcommand(sub, "show", "print a search space with every default filled in",
                      ("mamba-tune space show smoke",
                       "mamba-tune space show search_spaces/default.yaml --set scheduler.max_epochs=20"),
                      "Print a search space as the sweep reads it, every setting written out with its default "
                      "filled in, as YAML a sweep runs unchanged (--set applied exactly as `sweep` applies it).")
    show.add_argument("space", type=space_path,
                      help="search space: a shipped one by name (e.g. smoke) or a YAML file (e.g. my-space.yaml)")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="set a setting of the space by its dotted name, over the file's, as `sweep --set` does, "
                      "e.g. --set scheduler.max_epochs=20 (repeatable)")
    show.set_defaults(run=cmd_show)


def cmd_keys(args: argparse.Namespace) -> int:
    keys = space_keys()
    print(keys_markdown(keys, refused_keys()) if args.markdown else keys_table(keys), end="")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    source = described(str(args.space), args.set)
    space = parse_space(with_sets(read_yaml(args.space, "search space"), parse_sets(args.set)), source,
                        name=default_name(args.space))
    print(effective_yaml(space, source), end="")
    return 0
