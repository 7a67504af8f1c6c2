"""`make test`'s schedule stays true: every module that starts Ray runs in the Ray unit of tests/conftest.py
(or is listed, with its reason, as running beside it), and the pytest-xdist method the schedule overrides
exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import RAY_BESIDE_THE_UNIT, RAY_UNIT, UNIT_OF_MODULE
from tests.helpers import ROOT

RAY_FIXTURES = {"ray_head", "ray_address", "user_cluster"}


def starts_ray(path: Path) -> bool:
    """Whether a test module starts Ray: it imports from tests/ray_head.py (its nodes and heads), takes a
    Ray fixture, or says so (``STARTS_RAY = True``, for a Ray started some other way)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tests.ray_head":
            return True
        if isinstance(node, ast.FunctionDef) and {a.arg for a in node.args.args} & RAY_FIXTURES:
            return True
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "STARTS_RAY" for t in node.targets):
            return True
    return False


def test_every_module_that_starts_ray_is_in_the_ray_unit_or_says_why_not():
    modules = sorted(ROOT.glob("tests/**/test_*.py"))
    assert len(modules) > 50  # the glob found the suite
    ray_modules = {
        str(p.relative_to(ROOT)) for p in modules if "learning" not in p.parts and starts_ray(p)
    }  # tests/learning: not in make test
    in_unit = {module for module, unit in UNIT_OF_MODULE.items() if unit == RAY_UNIT}
    assert ray_modules - in_unit - set(RAY_BESIDE_THE_UNIT) == set(), "start Ray outside the unit"
    assert (in_unit | set(RAY_BESIDE_THE_UNIT)) - ray_modules == set(), "listed, but start no Ray"


def test_the_xdist_method_the_schedule_overrides_exists():
    scheduler = pytest.importorskip("xdist.scheduler")
    assert callable(getattr(scheduler.LoadFileScheduling, "_split_scope", None))
