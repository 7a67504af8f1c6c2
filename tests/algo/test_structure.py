"""The algo layer's internal structure: the two gradient paths (autograd in ``learner/torch_update``, the
numpy closed form in ``fast/mlp_grad``) share the segment code below them and never import each other. (The
order of algo's groups: .importlinter; sizes of every module: tests/test_structure.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ALGO = Path(__file__).resolve().parents[2] / "a3c" / "algo"


def algo_imports(module: str) -> set[str]:
    """The ``a3c.algo`` modules that ``a3c/algo/<group>/<module>.py`` imports, as ``group.module``."""
    tree = ast.parse((ALGO / f"{module.replace('.', '/')}.py").read_text())
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
        ("learner.torch_update", {"fast.mlp_grad", "models.numpy_mlp"}),
        ("fast.mlp_grad", {"learner.torch_update"}),
        ("models.numpy_mlp", {"learner.torch_update", "fast.mlp_grad", "loss.segment"}),
        ("loss.segment", {"learner.torch_update", "fast.mlp_grad", "models.numpy_mlp", "learner.rollout"}),
    ],
)
def test_gradient_paths_do_not_import_each_other(module, forbidden):
    assert not algo_imports(module) & forbidden
