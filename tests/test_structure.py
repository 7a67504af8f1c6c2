"""The package's shape: modules and classes stay small (a longer one says why at its top, with the words
"too long because"), so the folder tree stays readable as the architecture."""

from __future__ import annotations

import ast

import pytest

from tests.helpers import ROOT

MAX_MODULE_LINES, MAX_CLASS_LINES = 300, 200
MODULES = sorted([*(ROOT / "a3c").rglob("*.py"), *(ROOT / "envs").rglob("*.py")])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_classes_are_small(path):
    text = path.read_text()
    tree = ast.parse(text)
    if len(text.splitlines()) > MAX_MODULE_LINES:
        assert "too long because" in (ast.get_docstring(tree) or ""), f"{path.name}: say why it is long"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
            assert "too long because" in (ast.get_docstring(node) or ""), f"{node.name}: say why it is long"
