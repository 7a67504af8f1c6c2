"""The user's own env factories and wrappers, named in a run's config by a reference (``"pkg.mod:MyEnv"``,
``"__main__:MyEnv"``: ``a3c.core.user_code``): telling a factory's reference from a Gymnasium id, calling the
factory, applying the wrappers, each failure one line naming the object.

A Gymnasium id may carry a module too (``"pkg.mod:Name-v0"``, gymnasium imports the module and looks the name
up in its registry). Such an id has a version, which no Python name has: it is never a reference. One without
a version (``"pkg.mod:Name"``) is a Gymnasium id when the module, once imported, registered ``Name`` with
gymnasium (what ``gymnasium.make`` of it did before references existed), else a reference to ``Name`` in it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from a3c.core.config import BUILTIN_MODELS
from a3c.core.errors import BadInput
from a3c.core.user_code import is_reference, is_registered, names_script_code, resolve
from a3c_envs.errors import EnvSetupError

if TYPE_CHECKING:
    from a3c.core.config import Config


def is_factory(env_id: str) -> bool:
    """Whether ``env_id`` names an env factory (a class or a function returning a ``gymnasium.Env``) rather
    than a Gymnasium id; see the module docstring for ``"pkg.mod:Name"`` without a version."""
    module, sep, name = env_id.partition(":")
    if not sep or not module:
        return False
    if is_registered(env_id) or names_script_code(env_id):
        # an object given in this process, or a name only such an object has
        return True
    if not is_reference(env_id):
        return False
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - not importable: resolve() says so, naming the reference
        return True
    return name not in gym.registry


def code_references(config: Config) -> list[str]:
    """The references to the user's objects that ``config`` holds (what ``user_code.by_value`` may send
    to a child): its env when it names a factory, its wrappers, its model when it is a reference."""
    refs = [config.env_id] if is_factory(config.env_id) else []
    refs += list(config.wrappers)
    return refs + ([config.model] if config.model not in BUILTIN_MODELS else [])


def run_name(env_id: str) -> str:
    """A folder name for a run of ``env_id``: a factory's own name (``"MyEnv"`` of ``"__main__:MyEnv"``,
    ``"make_env"`` of ``"pkg.mod:make_env"``), the id itself otherwise."""
    if not is_factory(env_id):
        return env_id
    name = env_id.partition(":")[2].split(".<locals>.")[-1]
    return re.sub(r"[^\w.-]+", "", name.replace("#", "-")).strip(".-") or "env"


def _checked_env(obj: Any, what: str, ref: str) -> gym.Env:
    """``obj`` if it is a ``gymnasium.Env`` (a wrapper is one), else EnvSetupError naming ``ref``."""
    if not isinstance(obj, gym.Env):
        raise EnvSetupError(
            f"{what}: {ref!r} returned a {type(obj).__name__}, not a gymnasium.Env; expected "
            f"{'an env' if what == 'env_id' else 'the wrapped env'}"
        )
    return obj


def make_from_factory(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """The env the factory ``env_id`` returns, called with ``kwargs`` (the config's ``env_kwargs``).

    Raises:
        EnvSetupError: a factory that is not known here (``user_code.resolve``'s line), that refuses
            ``kwargs``, that raises, or that returns something other than a ``gymnasium.Env``.
    """
    factory = _resolved(env_id, "env_id")
    try:
        env = factory(**kwargs)
    except TypeError as exc:
        if kwargs and "argument" in str(exc):
            raise EnvSetupError(
                f"env_kwargs: {kwargs!r} is not allowed for {env_id} ({exc}); expected its arguments"
            ) from None
        raise EnvSetupError(f"env_id: factory {env_id!r} raised TypeError: {exc}") from exc
    except Exception as exc:
        raise EnvSetupError(f"env_id: factory {env_id!r} raised {type(exc).__name__}: {exc}") from exc
    return _checked_env(env, "env_id", env_id)


def apply_wrappers(env: gym.Env, wrappers: tuple[str, ...] | list[str]) -> gym.Env:
    """``env`` wrapped by each of ``wrappers`` (references of callables ``env -> env``), in order; the env
    is closed when one fails.

    Raises:
        EnvSetupError: a wrapper that is not known here, raises, or returns something other than an env.
    """
    for ref in wrappers:
        try:
            wrapper = _resolved(ref, "wrappers")
            try:
                wrapped = wrapper(env)
            except Exception as exc:
                raise EnvSetupError(f"wrappers: {ref!r} raised {type(exc).__name__}: {exc}") from exc
            env = _checked_env(wrapped, "wrappers", ref)
        except BaseException:
            env.close()
            raise
    return env


def refuse_unknown_script_code(refs: list[str], source: str) -> None:
    """EnvSetupError (exit 2) when one of ``refs`` (``code_references`` of a saved config) names an object
    defined in the script or notebook that trained the run and not known in this process: the command never
    unpickles a run's code (``user_code.pkl``); ``a3c.load``/``a3c.resume`` do with ``trust_code=True``."""
    for ref in refs:
        if not names_script_code(ref):
            continue
        try:
            resolve(ref, "env_id")
        except BadInput:
            raise EnvSetupError(
                f"{source}: {ref!r} was defined in the script or notebook that trained the run and is not "
                "known here, and the a3c command never unpickles a run's code; in Python, define it again "
                "under that name, or pass trust_code=True to a3c.load/a3c.resume (it unpickles the run "
                "dir's user_code.pkl)"
            ) from None


def _resolved(ref: str, what: str) -> Callable[..., Any]:
    """``user_code.resolve``, its BadInput as an EnvSetupError (the env's error kind)."""
    try:
        return resolve(ref, what)
    except EnvSetupError:
        raise
    except BadInput as exc:
        raise EnvSetupError(str(exc)) from None
