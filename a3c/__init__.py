"""a3c: asynchronous advantage actor-critic.

The Python API (docs/api.md): ``a3c.train(env, **config) -> Run`` (an env id, class or factory) and
``a3c.load(path) -> Policy``, imported when first used, so that ``import a3c`` (and the ``a3c`` command)
stays quick. The version is written in ``a3c.core.version`` only (setup.cfg reads it there)."""

from typing import Any

from a3c.core.version import __version__

__all__ = ["__version__", "BadInput", "Policy", "Run", "TrainingFailed", "load", "resume", "train"]
__all__ += ["evaluate_policy"]
__all__ += ["Callback", "CheckpointEvery", "RunContext", "StopOnNoImprovement"]  # callbacks


def __getattr__(name: str) -> Any:
    if name == "BadInput":
        from a3c.core.errors import BadInput

        return BadInput
    if name in __all__[1:]:
        import a3c.api

        return getattr(a3c.api, name)
    raise AttributeError(f"module 'a3c' has no attribute {name!r}")
