"""Each field's comment in a dataclass's own source: the one line of meaning `mamba-tune space keys` shows.

A field's comment is the `# ...` that trails its line, else the comment lines right above it (joined into one
line). Read with ast (where each field is) and tokenize (where each comment is), never by pattern on the text.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize


def field_comments(cls: type) -> dict[str, str]:
    """{field name: its comment} for every dataclass field of `cls`, "" for a field without one."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = _comments_by_line(source)
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = _comment_of(node, comments)
    return {field.name: found.get(field.name, "") for field in dataclasses.fields(cls)}


def _comments_by_line(source: str) -> dict[int, tuple[str, bool]]:
    """{line number: (the comment's text, whether it is alone on its line)}."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            comments[token.start[0]] = (text, token.line.lstrip().startswith("#"))
    return comments


def _comment_of(node: ast.AnnAssign, comments: dict[int, tuple[str, bool]]) -> str:
    text, alone = comments.get(node.end_lineno or node.lineno, ("", True))
    if text and not alone:
        return text
    above, line = [], node.lineno - 1
    while line in comments and comments[line][1]:
        above.insert(0, comments[line][0])
        line -= 1
    return " ".join(above)
