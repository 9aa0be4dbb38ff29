"""The layer contract, checked on the source: imports point one way, and only
the CLI prints or exits (docs/architecture.md)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "taxbreak"

# layer -> taxbreak layers it may import (besides itself)
ALLOWED = {
    "trace": set(),
    "readers": {"trace"},
    "synth": {"trace"},
    "decompose": {"trace", "readers"},
    "capture": {"trace", "readers", "decompose"},
    "report": {"trace", "readers", "decompose"},
    "scale": {"trace", "readers", "decompose", "report"},
    "whatif": {"trace", "readers", "decompose", "capture", "report"},
    "cli": {"trace", "readers", "synth", "decompose", "capture", "report", "scale", "whatif"},
}
# Top-level modules of the package that are the public surface, not a layer.
TOP_LEVEL = {"__init__", "__main__"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) == 1 and rel.stem in TOP_LEVEL:
            continue
        yield rel.parts[0], path


def _imported_layers(path: Path, layer: str) -> set[str]:
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - 1  # package depth of this module
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.startswith("taxbreak."):
                found.add(node.module.split(".")[1])
            elif node.level > depth and node.module:
                found.add(node.module.split(".")[0])
            elif node.level > depth:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("taxbreak."):
                    found.add(alias.name.split(".")[1])
    found.discard(layer)
    return found


def test_every_layer_is_known():
    assert {layer for layer, _ in _modules()} <= set(ALLOWED)


@pytest.mark.parametrize("layer,path", list(_modules()), ids=lambda v: str(v).split("taxbreak/")[-1])
def test_imports_point_one_way(layer, path):
    bad = _imported_layers(path, layer) - ALLOWED[layer] - {"__version__"}
    assert not bad, f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(bad)}"


def _prints_or_exits(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            owner = getattr(getattr(func, "value", None), "id", "")
            if (name == "print" and isinstance(func, ast.Name)) or (owner == "sys" and name == "exit"):
                hits.append(f"line {node.lineno}: {ast.unparse(func)}")
            if owner == "click" and name in {"echo", "secho"}:
                hits.append(f"line {node.lineno}: click.{name}")
    return hits


@pytest.mark.parametrize("layer,path", [m for m in _modules() if m[0] != "cli"],
                         ids=lambda v: str(v).split("taxbreak/")[-1])
def test_only_the_cli_prints_or_exits(layer, path):
    assert _prints_or_exits(path) == []
