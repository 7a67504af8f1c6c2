"""An env id's module (``pkg.mod:Name-v0``): gymnasium imports it to make the env. An id read from a file
someone else wrote (a checkpoint's config) must not import a module from the current directory by accident:
``python -m a3c`` puts the current directory first on ``sys.path``, so a ``json.py`` or ``mymod.py`` there
would be imported before (or instead of) an installed one."""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder
from typing import Any

from a3c_envs.errors import EnvSetupError

TRUST_FLAG = "--trust-env-module"
TRUST_HELP = (
    "Import the module of a saved env id (pkg.mod:Name-v0) even from the current directory; without it, a "
    "checkpoint's env module must be installed or on PYTHONPATH."
)


def env_module(env_id: str) -> str | None:
    """The module an env id names (``"pkg.mod"`` of ``"pkg.mod:Name-v0"``), or None."""
    module, sep, _ = env_id.partition(":")
    return module if sep else None


def first_path_folder() -> str | None:
    """The folder Python put first on ``sys.path`` for this process (``python -m``/``-c``/the REPL: the
    current directory when it started, ``""`` meaning the current one now; a script's own folder), or None
    under ``-P`` (safe_path)."""
    if sys.flags.safe_path or not sys.path:
        return None
    return os.path.abspath(sys.path[0] or ".")


def from_current_directory(module: str) -> bool:
    """Whether importing ``module`` now would take it from the folder Python put first on ``sys.path``
    (``first_path_folder``), not from where the environment's own paths (PYTHONPATH, site-packages) would
    find it: a file there, alone or shadowing an installed module of the same name. An imported module is
    imported."""
    top = module.split(".")[0]
    first = first_path_folder()
    if top in sys.modules or first is None:
        return False
    here = PathFinder.find_spec(top, [first])
    if here is None:
        return False
    elsewhere = PathFinder.find_spec(top, [p for p in sys.path[1:] if p])
    return elsewhere is None or elsewhere.origin != here.origin


def check_env_module(env_id: str, trusted: bool, source: str, what: str = "env") -> None:
    """EnvSetupError (exit 2) when ``env_id`` came from ``source`` (a file) and making it would import a
    module from the current directory, unless ``trusted`` (the user passed ``--trust-env-module``). The
    references of an env factory or of a wrapper (``pkg.mod:Name``) are checked alike: ``what`` names it."""
    module = env_module(env_id)
    if module is None or trusted or not from_current_directory(module):
        return
    raise EnvSetupError(
        f"{source}: its {what} {env_id!r} would import module {module.split('.')[0]!r} from "
        f"{first_path_folder()!r} (the current directory, first on sys.path); pass {TRUST_FLAG} if you mean "
        "it (or install the module)"
    )


def check_code_modules(
    env_id: str | None, wrappers: Any, model: str | None, trusted: bool, source: str
) -> None:
    """``check_env_module`` of every reference a file (a config file, a checkpoint, a resumed run's config)
    names: its env, its wrappers and its model when that is no built-in network (``mlp``, ``cnn``); and,
    unless ``trusted``, an env that is no ``gymnasium.Env`` class and a wrapper that is no
    ``gymnasium.Wrapper`` class are refused (``_check_kind``). A model builder is called with the env's
    spaces only, which no file chooses."""
    import gymnasium as gym

    from a3c.core.config import BUILTIN_MODELS

    if env_id is not None:
        check_env_module(env_id, trusted, source)
        _check_kind(env_id, "env", gym.Env, trusted, source)
    for wrapper in wrappers or ():
        check_env_module(str(wrapper), trusted, source, "wrapper")
        _check_kind(str(wrapper), "wrapper", gym.Wrapper, trusted, source)
    if model is not None and model not in BUILTIN_MODELS:
        check_env_module(str(model), trusted, source, "model")


def _check_kind(ref: str, what: str, kind: type, trusted: bool, source: str) -> None:
    """EnvSetupError unless ``trusted`` when a file's ``ref`` (an env factory, a wrapper) names no ``kind``
    class: a3c would call it with the file's ``env_kwargs`` (an env) or an env (a wrapper),
    and a file from someone else could name any installed function (``subprocess:run``) or one the running
    script defines. The objects the user gave this process are theirs to call."""
    from a3c.core.user_code import is_registered, resolve
    from a3c_envs.user_envs import is_factory

    if trusted or is_registered(ref) or (what == "env" and not is_factory(ref)):
        return
    try:
        obj = resolve(ref, what)
    except Exception:  # noqa: BLE001 - not resolvable: making the env says why, in one line
        return
    if isinstance(obj, type) and issubclass(obj, kind):
        return
    name = f"{kind.__module__.split('.')[0]}.{kind.__name__}"
    raise EnvSetupError(
        f"{source}: its {what} {ref!r} is not a {name} class, and a3c would call it with what the file "
        f"gives; pass {TRUST_FLAG} if you trust the file (Python: trust_env_module=True or trust_code=True)"
    )
