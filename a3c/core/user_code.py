"""The Python objects a user brings to a run (an env factory, a wrapper, a network builder): named in the
run's config by a reference, ``"module:qualname"``, and sent to child processes by value where that name
cannot be imported there (defined in ``__main__``, a notebook cell, a lambda or a local function), as
Stable-Baselines3 sends its subprocess envs' factories (cloudpickle, which gymnasium already depends on).

A process knows the objects it was given or received in a registry of its own: ``register`` (the trainer,
when the user passes an object), ``CodeBook`` (what a child unpickles: the objects sent by value, registered
there as they arrive), and ``resolve`` (a reference: the registry, else an import of the module)."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput

# The objects this process was given or received, by reference; and those of them that were found in the
# running script (``_from_this_main``), which a file's reference may name but not vouch for.
_REGISTRY: dict[str, Any] = {}
_FOUND_IN_MAIN: set[str] = set()

# A reference: dotted module path, a colon, a dotted attribute path (a class, a function, a nested class).
_REFERENCE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# The modules a name in them cannot be imported by from another process.
_SCRIPT_MODULES = ("__main__", "__mp_main__")

# The file of a run dir holding its objects sent by value, for a later load in Python.
CODE_FILE = "user_code.pkl"


def is_reference(text: str) -> bool:
    """Whether ``text`` reads as ``"pkg.module:name"`` (a gymnasium id such as ``"pkg.mod:Name-v0"`` does
    not: ``-v0`` is no attribute name)."""
    return _REFERENCE.fullmatch(text) is not None


def _name_of(obj: Any) -> str:
    """``"module:qualname"`` of a class or a function; of another callable (an instance, a partial), its
    type's, followed by ``()``."""
    if hasattr(obj, "__qualname__") and hasattr(obj, "__module__"):
        return f"{obj.__module__}:{obj.__qualname__}"
    kind = type(obj)
    return f"{kind.__module__}:{kind.__qualname__}()"


def _import(ref: str) -> Any:
    """The object a reference names, imported (ImportError/AttributeError when it cannot be)."""
    module, _, path = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def importable(obj: Any) -> bool:
    """Whether another process can import ``obj`` by its name (``_name_of``): a top-level class or function
    of an importable module, not of ``__main__``."""
    ref = _name_of(obj)
    if not is_reference(ref) or ref.split(":")[0] in _SCRIPT_MODULES:
        return False
    try:
        return _import(ref) is obj
    except (ImportError, AttributeError):
        return False


def register(obj: Any, what: str) -> str:
    """``obj``'s reference, and ``obj`` known by it in this process (``resolve``); ``what`` (the config field,
    e.g. ``env_id``) names it in errors. Two objects of one name (two lambdas) get ``#2``, ``#3``, ..."""
    if not callable(obj):
        raise BadInput(f"{what}: {obj!r} is not allowed; expected a callable (a class or a function)")
    base = ref = _name_of(obj)
    count = 1
    while ref in _REGISTRY and _REGISTRY[ref] is not obj:
        count += 1
        ref = f"{base}#{count}"
    _REGISTRY[ref] = obj
    return ref


def names_script_code(ref: str) -> bool:
    """Whether ``ref`` is a name only an object given in a process has: one of a script or notebook
    (``__main__:Coin``), a second of one name (``#2``), a lambda or local (``<lambda>``), a partial or
    another callable instance (``()``). No other process can import it by that name."""
    module, _, name = ref.partition(":")
    return module in _SCRIPT_MODULES or any(c in name for c in "#<(")


def is_registered(ref: str) -> bool:
    """Whether the user gave this process the object of that reference (or a parent sent it): their own to
    call. One found in the running script by a file's reference is not (``resolve``)."""
    return ref in _REGISTRY and ref not in _FOUND_IN_MAIN


def _from_this_main(ref: str) -> Any:
    """The object of the running script or notebook (``sys.modules["__main__"]``) that ``"__main__:Name"``
    names, when it defines one again (a later session of the script that trained the run); else None."""
    module, _, path = ref.partition(":")
    main = sys.modules.get("__main__")
    if module not in _SCRIPT_MODULES or main is None or not is_reference(ref):
        return None
    obj: Any = main
    for part in path.split("."):  # static lookups: a name must not run the script's properties
        obj = inspect.getattr_static(obj, part, None)
    # Only what the script defines itself: not what it imported (``__main__:os.system``).
    return obj if callable(obj) and getattr(obj, "__module__", None) in _SCRIPT_MODULES else None


def resolve(ref: str, what: str) -> Any:
    """The object ``ref`` names: the one registered in this process, else, for ``"__main__:Name"``, the
    running script's or notebook's own ``Name``, else imported; BadInput in one line naming ``what`` (a
    config field) when none can be."""
    if ref in _REGISTRY:
        return _REGISTRY[ref]
    if (found := _from_this_main(ref)) is not None:
        _REGISTRY[ref] = found  # sent to children by value as the objects the user gave are
        _FOUND_IN_MAIN.add(ref)
        return found
    if names_script_code(ref):
        raise BadInput(
            f"{what}: {ref!r} was defined in the script or notebook that started the run and is not known "
            "here; define it again under that name in this script or notebook, pass trust_code=True to "
            "a3c.load/a3c.resume to unpickle it from the run dir's user_code.pkl (that runs its code), or "
            "define it in an importable module"
        )
    if not is_reference(ref):
        raise BadInput(f"{what}: {ref!r} is not allowed; expected pkg.module:name of an importable callable")
    try:
        obj = _import(ref)
    except Exception as exc:  # noqa: BLE001 - a module may raise anything at import: one line, not a traceback
        raise BadInput(
            f"{what}: {ref!r} cannot be imported ({type(exc).__name__}: {exc}); expected pkg.module:name "
            "of a callable importable here"
        ) from None
    if not callable(obj):
        raise BadInput(f"{what}: {ref!r} is not allowed; it names a {type(obj).__name__}, not a callable")
    return obj


def by_value(refs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The registered objects among ``refs`` that another process could not import by name."""
    return {r: _REGISTRY[r] for r in refs if r in _REGISTRY and not importable(_REGISTRY[r])}


class CodeBook:
    """Objects sent by value to child processes: pickled with cloudpickle (their code too), registered in the
    receiving process as they are unpickled, so ``resolve`` finds them there.

    Args:
        objects: {reference: object}, e.g. ``by_value(...)`` of the references a config holds.
    """

    def __init__(self, objects: dict[str, Any] | None = None):
        self.objects = dict(objects or {})

    def __bool__(self) -> bool:
        return bool(self.objects)

    def __getstate__(self) -> dict[str, bytes]:
        import cloudpickle

        return {ref: cloudpickle.dumps(obj) for ref, obj in self.objects.items()}

    def __setstate__(self, state: dict[str, bytes]) -> None:
        import pickle

        self.objects = {ref: pickle.loads(data) for ref, data in state.items()}
        _REGISTRY.update(self.objects)

    def save(self, run_dir: Path) -> None:
        """Write the objects to ``run_dir/user_code.pkl`` (nothing when there are none), for a later
        ``a3c.load``/``a3c.resume`` in Python."""
        if self.objects:
            import pickle

            (run_dir / CODE_FILE).write_bytes(pickle.dumps(self))

    @staticmethod
    def load(run_dir: Path) -> CodeBook:
        """The objects the run in ``run_dir`` saved (``save``), registered in this process; an empty book
        when it saved none or ``run_dir`` is no run dir (one with ``config.json``). Unpickling runs their
        code: only for the Python API's ``trust_code=True``, on runs the user trusts. A file that cannot be
        unpickled is BadInput naming it."""
        import pickle

        path = run_dir / CODE_FILE
        if not (run_dir / "config.json").is_file() or not path.is_file():
            return CodeBook()
        try:
            book = pickle.loads(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - a damaged file or code that no longer imports
            raise BadInput(
                f"trust_code: {str(path)!r} cannot be unpickled ({type(exc).__name__}: {exc}); expected the "
                "user_code.pkl a3c wrote"
            ) from None
        if not isinstance(book, CodeBook):
            raise BadInput(f"trust_code: {str(path)!r} is not allowed; expected the user_code.pkl a3c wrote")
        return book
