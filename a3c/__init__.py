"""a3c: asynchronous advantage actor-critic.

The Python API (docs/api.md): ``a3c.train(env_id, **config) -> Run`` and ``a3c.load(path) -> Policy``,
imported when first used, so that ``import a3c`` (and the ``a3c`` command) stays quick. The version below is
the only place it is written (setup.cfg reads it: ``version = attr: a3c.__version__``)."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["BadInput", "Policy", "Run", "TrainingFailed", "load", "resume", "train"]


def __getattr__(name: str) -> Any:
    if name == "BadInput":
        from a3c.core.errors import BadInput

        return BadInput
    if name in __all__:
        import a3c.api

        return getattr(a3c.api, name)
    raise AttributeError(f"module 'a3c' has no attribute {name!r}")
