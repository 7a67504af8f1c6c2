"""The algo layer's internal structure: the two gradient paths (autograd in ``update``, the numpy closed
form in ``mlp_grad``) share the segment code below them and never import each other; modules and classes
stay small (a longer one says why at its top)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ALGO = Path(__file__).resolve().parents[2] / "a3c" / "algo"
MAX_MODULE_LINES, MAX_CLASS_LINES = 300, 200


def algo_imports(module: str) -> set[str]:
    """The ``a3c.algo`` modules that ``a3c/algo/<module>.py`` imports, by short name."""
    tree = ast.parse((ALGO / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n.removeprefix("a3c.algo.") for n in names if n.startswith("a3c.algo.")}


@pytest.mark.parametrize(
    "module,forbidden",
    [
        ("update", {"mlp_grad", "mlp"}),
        ("mlp_grad", {"update"}),
        ("mlp", {"update", "mlp_grad", "segment"}),
        ("segment", {"update", "mlp_grad", "mlp", "rollout"}),
    ],
)
def test_gradient_paths_do_not_import_each_other(module, forbidden):
    assert not algo_imports(module) & forbidden


@pytest.mark.parametrize("path", sorted(ALGO.glob("*.py")), ids=lambda p: p.name)
def test_modules_and_classes_are_small(path):
    text = path.read_text()
    tree = ast.parse(text)
    if len(text.splitlines()) > MAX_MODULE_LINES:
        assert "too long because" in (ast.get_docstring(tree) or ""), f"{path.name}: say why it is long"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
            assert "too long because" in (ast.get_docstring(node) or ""), f"{node.name}: say why it is long"
