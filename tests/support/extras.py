"""The guard for optional extras: a test that needs one skips where it is not installed, and fails in CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE_EXTRAS_VAR = "A3C_REQUIRE_EXTRAS"  # .ci/run sets it: there every extra is installed (make test)


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of the optional ``extra`` and return it. Where it cannot be imported (missing, or
    broken: any error on import), skip with the install command; under ``A3C_REQUIRE_EXTRAS=1`` fail instead,
    so that CI, which installs every extra, cannot pass by silently skipping a family of tests.
    Works at module level (a whole test module) and inside a test."""
    try:
        return importlib.import_module(module)
    except Exception as error:  # a broken install raises more than ImportError (e.g. a missing shared lib)
        message = (
            f"the {extra} extra is not usable (import {module}: {type(error).__name__}: {error}); "
            f"install it: pip install -e '.[{extra}]' -c constraints.txt (make test installs it)"
        )
        if os.environ.get(REQUIRE_EXTRAS_VAR, "") not in ("", "0"):
            pytest.fail(f"{message}; {REQUIRE_EXTRAS_VAR} is set, so this fails instead of skipping", False)
        pytest.skip(message, allow_module_level=True)
