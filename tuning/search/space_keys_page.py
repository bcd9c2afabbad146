"""The keys of a search space (tuning/search/space_keys.py) as text: a table for the terminal, a Markdown page
(docs/space-keys.md, which `make docs` writes and a test keeps equal to what the code generates)."""

from __future__ import annotations

from itertools import groupby

from tuning.search.space_keys import SpaceKey

COLUMNS = ("key", "type", "default", "bounds", "searchable", "meaning")
REGENERATE = "make docs  (or: .venv/bin/mamba-tune space keys --markdown > docs/space-keys.md)"
MOVES_SAMPLES = "(moves samples)"  # after the search name of a setting whose values cut different samples


def keys_table(keys: tuple[SpaceKey, ...]) -> str:
    """One aligned row per key under a header; the meaning last, unwrapped."""
    rows = [COLUMNS, *((k.named, k.type, k.default, k.bounds, _searchable(k.searchable, k), k.meaning) for k in keys)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    return "".join("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
                   + "\n" for row in rows)


def keys_markdown(keys: tuple[SpaceKey, ...], refused: dict[str, str]) -> str:
    """docs/space-keys.md: a table per section of the space, then the run settings a space may not set."""
    lines = ["# Search-space keys", "",
             "<!-- Generated from the dataclasses that read a space; do not edit. Regenerate: "
             f"{REGENERATE} -->", "",
             "Every key a search-space YAML (search_spaces/*.yaml) accepts: its type, the default a space that omits "
             "it gets, its bounds where the code keeps a table of them, and the name under `search:` that searches "
             "it, where one can. `mamba-tune space keys` prints the same; `mamba-tune space show SPACE` prints a "
             "space with every default filled in. A key's meaning is its field's comment in the dataclass named "
             "above its table.", "",
             "Each setting has one dotted name, the same in a space, its `search:` and `initial` entries, `--set` of "
             "`sweep`, `train` and `model`, best.yaml and a trial's MLflow params: `model.d_model`, `train.lr`, "
             "`data.window`, `scheduler.max_epochs`. A space writes its fixed run settings in its top-level `data`, "
             "`model` and `train` sections; `run:` (`run.model.d_model`) is their older spelling, still read, and a "
             "setting given in both is refused. A short name (`learning_rate`) is shown beside the setting it names "
             "(`train.lr (learning_rate)`) and is that setting wherever it is used; one setting given or searched "
             "under two names, or both fixed and searched, is refused (but `data.window`, whose fixed value is the "
             "shared Dataset's window).", "",
             f"A searchable setting marked {MOVES_SAMPLES} changes which bars a trial's samples are (a longer "
             "`data.window` starts every segment's first sample later). A sweep that searches one scores every trial "
             "and confirmation run on the same samples, those of its longest value, with the same scaling and HAR: "
             "it sets `data.align_window` (tuning/search/sample_alignment.py), so their losses compare.", ""]
    for section, group in groupby(keys, key=lambda k: k.section):
        rows = list(group)
        owners = sorted({owner for k in rows for owner in k.owner.split(", ")})
        lines += [f"## {section}", "", f"Read by {', '.join(f'`{o}`' for o in owners)}.", "",
                  "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cell(c) for c in (_named(k), k.type, _code(k.default), k.bounds,
                                                          _searchable(_code(k.searchable), k), k.meaning))
                  + " |" for k in rows]
        lines.append("")
    if refused:
        lines += ["## Set by the sweep", "", "A space may not set these; the parser says why:", ""]
        lines += [f"- `{key}`: {_cell(why)}" for key, why in refused.items()]
        lines.append("")
    return "\n".join(lines)


def _named(key: SpaceKey) -> str:
    """The key as code, its short name beside it: `train.lr` (`learning_rate`)."""
    return f"`{key.key}` (`{key.alias}`)" if key.alias else f"`{key.key}`"


def _searchable(text: str, key: SpaceKey) -> str:
    """The search name(s) as shown, marked where searching the setting moves samples."""
    return f"{text} {MOVES_SAMPLES}" if key.moves_samples else text


def _code(text: str) -> str:
    """A value as code; a phrase in parentheses (a default such as "(required)") and nothing as they are."""
    return f"`{text}`" if text and not text.startswith("(") else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
