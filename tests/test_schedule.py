"""`make test`'s schedule stays true: every module that starts Ray runs in the Ray unit of tests/conftest.py
(or is listed, with its reason, as running beside it), and the pytest-xdist method the schedule overrides
exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import RAY_BESIDE_THE_UNIT, RAY_UNIT, UNIT_OF_MODULE
from tests.support import ROOT

RAY_FIXTURES = {"ray_head", "ray_address", "user_cluster"}


def starts_ray(path: Path) -> bool:
    """Whether a test module starts Ray: it imports tests/support/ray_head.py (its nodes and heads) in any
    form, takes a Ray fixture (as an argument or through ``usefixtures``), or says so (``STARTS_RAY = True``,
    for a Ray started some other way)."""
    text = path.read_text()
    if not any(word in text for word in (*RAY_FIXTURES, "STARTS_RAY")):  # each way below names one of them
        return False  # without parsing it: most modules (the parse of every one took 0.3 s)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(alias.name for alias in node.names)]
            if any(name.split(".")[-1] == "ray_head" for name in names):
                return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[-1] == "ray_head" for a in node.names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if {a.arg for a in arguments} & RAY_FIXTURES:
                return True
        usefixtures = isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "usefixtures"
        if usefixtures and {getattr(a, "value", None) for a in node.args} & RAY_FIXTURES:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(getattr(t, "id", "") == "STARTS_RAY" for t in targets)
            if named and getattr(node.value, "value", None) is True:
                return True
    return False


@pytest.mark.parametrize(
    ("source", "starts"),
    [("import tests.support.ray_head", True), ("from tests.support import ray_head", True),
     ("from . import ray_head", True),
     ("async def test_x(ray_address): pass", True), ("def test_x(*, ray_head): pass", True),
     ("pytestmark = pytest.mark.usefixtures('ray_address')", True), ("STARTS_RAY: bool = True", True),
     ("STARTS_RAY = False", False), ("def test_x(tmp_path): pass", False)],
)  # fmt: skip
def test_the_scan_sees_each_way_a_module_starts_ray(tmp_path, source, starts):
    module = tmp_path / "test_module.py"
    module.write_text(source + "\n")
    assert starts_ray(module) is starts


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
