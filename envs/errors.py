"""The one error the envs package raises for bad input."""

from __future__ import annotations


class EnvSetupError(ValueError):
    """An env id that cannot be made, or a space this project does not support yet (bad input, exit 2)."""
