"""The algo layer's internal structure: the two gradient paths (autograd in ``loss``, the numpy closed form in
``numpy_mlp``) share the rollout's segments and targets below them and never use each other's code, and the
default update runs through the modules docs/how-it-works.md lists, in its order. (The order of algo's
modules: .importlinter; the package's shape: tests/test_structure.py.)"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from a3c.algo.learner import Learner, build_shared
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from tests.support import ROOT

ALGO = ROOT / "a3c" / "algo"
HOW_IT_WORKS = ROOT / "docs" / "how-it-works.md"


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


def algo_modules_run_by(action: Callable[[], object]) -> list[str]:
    """The ``a3c/algo`` modules whose Python code ``action()`` runs, in the order it first reaches each."""
    reached: list[str] = []

    def profile(frame, event, arg):  # noqa: ANN001, ANN202 - sys.setprofile's signature
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.parent == ALGO and path.name not in reached:
            reached.append(path.name)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return reached


def test_the_default_update_runs_through_the_modules_how_it_works_lists_in_order():
    stated = re.search(r"The default path .*?in\s+this\s+order:(.*?)\.\s", HOW_IT_WORKS.read_text(), re.S)
    assert stated, "docs/how-it-works.md no longer lists the default path's modules"
    listed = re.findall(r"`(\w+\.py)`", stated.group(1))
    config = Config(env_id="CartPole-v1").validate()
    model, optimizer = build_shared(config, Spaces((4,), 2))
    learner = Learner(config, model, optimizer, seed=0)
    try:
        learner.update()  # the first update, whatever it sets up on the way
        assert algo_modules_run_by(learner.update) == listed
    finally:
        learner.close()
    assert len(listed) <= 6
