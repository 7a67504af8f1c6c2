"""An env id's module (``pkg.mod:Name-v0``): gymnasium imports it to make the env. An id read from a file
someone else wrote (a checkpoint's config) must not import a module from the current directory by accident:
``python -m a3c`` puts the current directory first on ``sys.path``, so a ``json.py`` or ``mymod.py`` there
would be imported before (or instead of) an installed one."""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

from envs.errors import EnvSetupError

TRUST_FLAG = "--trust-env-module"
TRUST_HELP = (
    "Import the module of a saved env id (pkg.mod:Name-v0) even from the current directory; without it, a "
    "checkpoint's env module must be installed or on PYTHONPATH."
)


def env_module(env_id: str) -> str | None:
    """The module an env id names (``"pkg.mod"`` of ``"pkg.mod:Name-v0"``), or None."""
    module, sep, _ = env_id.partition(":")
    return module if sep else None


def from_current_directory(module: str) -> bool:
    """Whether importing ``module`` now would take it from the current directory through the entry Python
    put first on ``sys.path`` (``python -m``, ``-c``, the REPL), not from where the environment's own paths
    (PYTHONPATH, site-packages) would find it. An imported module is imported."""
    top = module.split(".")[0]
    if top in sys.modules or sys.flags.safe_path or not sys.path:
        return False
    first = sys.path[0]
    if os.path.abspath(first or ".") != os.getcwd():
        return False
    here = PathFinder.find_spec(top, [os.getcwd()])
    if here is None:
        return False
    elsewhere = PathFinder.find_spec(top, [p for p in sys.path[1:] if p])
    return elsewhere is None or elsewhere.origin != here.origin


def check_env_module(env_id: str, trusted: bool, source: str) -> None:
    """EnvSetupError (exit 2) when ``env_id`` came from ``source`` (a file) and making it would import a
    module from the current directory, unless ``trusted`` (the user passed ``--trust-env-module``)."""
    module = env_module(env_id)
    if module is None or trusted or not from_current_directory(module):
        return
    raise EnvSetupError(
        f"{source}: its env {env_id!r} would import module {module.split('.')[0]!r} from the current "
        f"directory {os.getcwd()!r}; pass {TRUST_FLAG} if you mean it (or install the module)"
    )
