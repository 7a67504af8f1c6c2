"""Environments: the only package that calls ``gymnasium.make``.

It builds single and vectorised envs, checks their spaces up front, and holds per-env presets
(tuned hyperparameters and target returns as TOML files under ``envs/presets/``). Atari ids get the
DeepMind preprocessing (``a3c_envs.atari``; ``frame_stack=k`` for k-frame observations), and their vector envs
run in ale-py's C++ envs with the same semantics where it can (``a3c_envs.atari_vector``).
"""

from a3c.core.spaces import Spaces
from a3c_envs.factory import (
    EnvInfo,
    EnvSetupError,
    inspect_env,
    make_env,
    make_eval_vector_env,
    make_vector_env,
)
from a3c_envs.presets import load_preset, preset_path

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
