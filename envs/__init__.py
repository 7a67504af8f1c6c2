"""Environments: the only package that calls ``gymnasium.make``.

It builds single and vectorised envs, checks their spaces up front, and holds per-env presets
(tuned hyperparameters and target returns as TOML files under ``envs/presets/``).
"""

from a3c.core.spaces import Spaces
from envs.factory import EnvInfo, EnvSetupError, inspect_env, make_env, make_eval_vector_env, make_vector_env
from envs.presets import load_preset, preset_path

__all__ = [
    "EnvInfo",
    "EnvSetupError",
    "Spaces",
    "inspect_env",
    "load_preset",
    "make_env",
    "make_eval_vector_env",
    "make_vector_env",
    "preset_path",
]
