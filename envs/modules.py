"""An env id's module (``pkg.mod:Name-v0``): gymnasium imports it to make the env. An id read from a file
someone else wrote (a checkpoint's config) must not import a module from the current directory by accident:
``python -m a3c`` puts the current directory first on ``sys.path``, ``PYTHONPATH=.`` (or ``./src``, or a link
to the current directory) puts it there for the installed ``a3c`` script too, so a ``json.py`` or
``mymod.py`` there would be imported before (or instead of) an installed one. Whatever ``sys.path`` entry
leads to it, a module whose file lies in or under the current directory (or the folder Python put first) is
the current directory's, unless it lies in the interpreter's own folders (a virtual environment inside the
project is installed code)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
from typing import Any

from a3c_envs.errors import EnvSetupError

TRUST_FLAG = "--trust-env-module"
TRUST_HELP = (
    "Import the module of a saved env id (pkg.mod:Name-v0) even from the current directory; without it, a "
    "checkpoint's env module must be installed or on PYTHONPATH outside the current directory."
)
INSTALLED_PATHS = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")  # sysconfig's names


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


def untrusted_folders() -> list[str]:
    """The folders (resolved) whose modules a file may not import unasked: the current directory, and the
    folder Python put first on ``sys.path`` (``first_path_folder``) unless that is an installed one (the
    console script's ``bin``)."""
    folders = [os.path.realpath(os.getcwd())]
    first = first_path_folder()
    if first is not None and not _within_any(os.path.realpath(first), installed_folders()):
        folders.append(os.path.realpath(first))
    return folders


def installed_folders() -> list[str]:
    """The interpreter's own folders (resolved): the standard library, site-packages (the user's too), the
    scripts folder, and the folders the ``.pth`` files there add (an editable install: a project's ``src``);
    what lies in them was installed, wherever the current directory is."""
    paths = sysconfig.get_paths()
    folders = [paths[name] for name in INSTALLED_PATHS if name in paths]
    with contextlib.suppress(AttributeError):  # an embedded interpreter's stripped-down site module
        folders += [*site.getsitepackages(), site.getusersitepackages()]
    return [os.path.realpath(folder) for folder in [*folders, *pth_folders(folders)]]


def pth_folders(site_dirs: list[str]) -> list[str]:
    """The folders the ``.pth`` files of ``site_dirs`` add to ``sys.path``, as ``site`` reads them: one a
    line, relative to the site dir; comments, blank lines and ``import`` lines are not folders."""
    found = []
    for site_dir in site_dirs:
        try:
            names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as file:
                    lines = file.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    found.append(os.path.join(site_dir, line))
    return found


def module_files(top: str) -> list[str]:
    """Where importing the top-level module ``top`` now would take it from (resolved): its file, or the
    folders of a namespace package; [] for a built-in module or one nothing finds. Import's own search
    (``importlib.util.find_spec``; no module runs for a top-level name), its caches refreshed first so
    that a file just written counts."""
    importlib.invalidate_caches()
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.has_location and spec.origin:
        return [os.path.realpath(spec.origin)]
    return [os.path.realpath(folder) for folder in spec.submodule_search_locations or ()]


def current_directory_file(module: str) -> str | None:
    """The file (or namespace folder) importing ``module`` now would take from the current directory or
    under it, through whichever ``sys.path`` entry (``untrusted_folders``), and not from an installed
    folder; None when it comes from elsewhere. A module already imported is not imported again."""
    top = module.split(".")[0]
    if top in sys.modules:
        return None
    untrusted = untrusted_folders()
    # An installed folder that is the current directory or holds it (a flat project installed with pip -e,
    # run from its root or a folder below) does not make every file there installed.
    installed = [f for f in installed_folders() if not any(_within_any(u, [f]) for u in untrusted)]
    for found in module_files(top):
        if _within_any(found, untrusted) and not _within_any(found, installed):
            return found
    return None


def from_current_directory(module: str) -> bool:
    """Whether importing ``module`` now would take it from the current directory
    (``current_directory_file``)."""
    return current_directory_file(module) is not None


def _within_any(path: str, folders: list[str]) -> bool:
    """Whether the resolved ``path`` is one of the resolved ``folders`` or lies under one."""
    return any(path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders)


def check_env_module(env_id: str, trusted: bool, source: str, what: str = "env") -> None:
    """EnvSetupError (exit 2) when ``env_id`` came from ``source`` (a file) and making it would import a
    module from the current directory, unless ``trusted`` (the user passed ``--trust-env-module``). The
    references of an env factory or of a wrapper (``pkg.mod:Name``) are checked alike: ``what`` names it."""
    module = env_module(env_id)
    found = None if module is None or trusted else current_directory_file(module)
    if found is None:
        return
    raise EnvSetupError(
        f"{source}: its {what} {env_id!r} would import module {module.split('.')[0]!r} from {found!r} (in "
        f"the current directory, through sys.path); pass {TRUST_FLAG} if you mean it (or install the module, "
        "or run from another directory)"
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
