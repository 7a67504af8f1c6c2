"""The one error the envs package raises for bad input: a kind of ``BadInput``, so every bad-input path
reads the same to the CLI (one line, exit 2) and to the Python API (``except a3c.BadInput``)."""

from __future__ import annotations

from a3c.core.errors import BadInput


class EnvSetupError(BadInput):
    """An env id that cannot be made, or a space this project does not support yet."""
