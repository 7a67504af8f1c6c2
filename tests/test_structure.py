"""The package's shape: a3c/algo is a handful of modules, each named for what it holds; no module or package
anywhere is named for a speed or a vague word (CONTRIBUTING.md, "Layout")."""

from __future__ import annotations

import pytest

from tests.support import ROOT

MAX_ALGO_MODULES = 14
VAGUE_NAMES = {"fast", "shared", "utils", "util", "helpers", "misc", "common"}
MODULES = sorted([*(ROOT / "a3c").rglob("*.py"), *(ROOT / "envs").rglob("*.py")])


def test_algo_holds_a_handful_of_modules():
    modules = [p for p in (ROOT / "a3c" / "algo").rglob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_ALGO_MODULES, sorted(p.name for p in modules)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_named_for_a_speed_or_a_vague_word(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    assert not VAGUE_NAMES & set(parts), f"{path.relative_to(ROOT)}: name it for what it holds"
