"""The algo layer's internal structure: the two gradient paths (autograd in ``loss``, the numpy closed form in
``numpy_mlp``) share the rollout's segments and targets below them and never use each other's code. (The order
of algo's modules: .importlinter; the package's shape: tests/test_structure.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ALGO = Path(__file__).resolve().parents[2] / "a3c" / "algo"


def algo_imports(module: str) -> dict[str, set[str]]:
    """The ``a3c.algo`` modules that ``a3c/algo/<module>.py`` imports, each with the names it takes."""
    tree = ast.parse((ALGO / f"{module}.py").read_text())
    names: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("a3c.algo."):
            names.setdefault(node.module.removeprefix("a3c.algo."), set()).update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("a3c.algo."):
                    names.setdefault(alias.name.removeprefix("a3c.algo."), {"*"})
    return names


@pytest.mark.parametrize(
    "module,forbidden",
    [("loss", {"numpy_mlp", "learner"}), ("rollout", {"loss", "numpy_mlp", "learner"})],
)
def test_gradient_paths_do_not_import_each_other(module, forbidden):
    assert not algo_imports(module).keys() & forbidden


def test_the_closed_form_takes_only_the_loss_terms_type_from_the_autograd_module():
    assert algo_imports("numpy_mlp").get("loss", set()) <= {"LossTerms"}
