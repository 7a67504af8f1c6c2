"""Environments: the only package that calls ``gymnasium.make``.

It builds single and vectorised envs, checks their spaces up front, and holds per-env presets
(tuned hyperparameters and target returns as TOML files under ``envs/presets/``). Atari ids get the
DeepMind preprocessing (``a3c.envs.atari``; ``frame_stack=k`` for k-frame observations), and their vector envs
run in ale-py's C++ envs with the same semantics where it can (``a3c.envs.atari_vector``).
"""

from a3c.envs.factory import (
    EnvInfo,
    EnvSetupError,
    inspect_env,
    make_env,
    make_eval_vector_env,
    make_vector_env,
)
from a3c.envs.presets import load_preset, preset_path

from a3c.core.spaces import Spaces

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
