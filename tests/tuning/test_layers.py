"""The house rule of tuning/: imports go down the flow of a sweep, never back (tuning/__init__.py)."""

import ast
from pathlib import Path

import pytest

TUNING = Path(__file__).resolve().parents[2] / "tuning"
# Each stage may import itself and the stages after it; `model` knows nothing of any of them.
LAYERS = ["cli", "sweep", "cluster", "tracking", "progress", "search", "bars_import", "shared"]
SHARED = {"errors", "yaml_io", "sweep_files", "bars_file", "uri_secrets", "_moved"}


def layer(module: str) -> str:
    """tuning.search.gate -> "search"; tuning.errors -> "shared"."""
    part = module.split(".")[1]
    return "shared" if part in SHARED else part


def imported(path: Path) -> set[str]:
    """The tuning.* and model.* modules a file imports (at the top or inside a function)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "tuning":  # from tuning import sweep
            names.update(f"tuning.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in ("tuning", "model")}


def modules() -> list[Path]:
    return sorted(p for p in TUNING.rglob("*.py") if p.name != "__init__.py" and p.stem != "_moved")


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(TUNING)))
def test_a_tuning_module_imports_only_its_own_stage_and_those_after_it(path):
    relative = path.relative_to(TUNING).with_suffix("")
    own = layer("tuning." + ".".join(relative.parts))
    for name in imported(path):
        if name.startswith("model"):
            continue
        assert LAYERS.index(layer(name)) >= LAYERS.index(own), f"{relative} ({own}) imports {name} ({layer(name)})"


def test_model_imports_nothing_of_tuning():
    for path in (TUNING.parent / "model").rglob("*.py"):
        assert not {n for n in imported(path) if n.startswith("tuning")}, path
