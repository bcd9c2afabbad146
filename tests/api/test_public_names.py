"""docs/python-api.md names every public name of mamba_tune, every parameter of each function and every field of each
result: a name, a parameter or a field that changes without the page fails here."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import mamba_tune

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def reference_sections() -> dict[str, str]:
    """The page's Reference: `### \\`NAME\\`` heading -> the text under it."""
    reference = PAGE.read_text().split("\n## Reference\n", 1)[1]
    parts = re.split(r"^### `([\w.]+)`\n", reference, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def documented_names(section: str) -> list[str]:
    """The names a section's list documents, in order: `- \\`name\\`: ...`."""
    return re.findall(r"^- `(\w+)`", section, flags=re.M)


def test_every_public_name_has_a_section_and_every_section_a_public_name():
    assert list(reference_sections()) == list(mamba_tune.__all__)
    assert all(hasattr(mamba_tune, name) for name in mamba_tune.__all__)


def test_each_functions_parameters_are_listed_in_order_and_its_signature_shown():
    sections = reference_sections()
    for name in mamba_tune.__all__:
        function = getattr(mamba_tune, name)
        if not inspect.isfunction(function):
            continue
        parameters = list(inspect.signature(function).parameters)
        assert documented_names(sections[name]) == parameters, name
        shown = " ".join(sections[name].split("`", 2)[1].split())  # the signature line(s), joined
        assert shown.startswith(f"{name}(") and all(re.search(rf"\b{p}\b", shown) for p in parameters), name


def test_each_results_fields_are_listed_in_order():
    sections = reference_sections()
    for name in mamba_tune.__all__:
        value = getattr(mamba_tune, name)
        if dataclasses.is_dataclass(value):
            assert documented_names(sections[name]) == [f.name for f in dataclasses.fields(value)], name
