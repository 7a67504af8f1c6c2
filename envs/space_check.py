"""Which env spaces the models take: the check (one clear line for anything else), the observation
encodings (gymnasium's ``FlattenObservation``), and the ``Spaces`` a model is built for.

Observations, as Stable-Baselines3 takes them: a flat Box as it is, uint8 images [C, H, W] for the conv
net; a Discrete one-hot; MultiDiscrete, MultiBinary, Tuple and Dict flattened by
``gymnasium.spaces.flatten`` (which one-hots every Discrete and MultiDiscrete part), all as float32.
Actions: Discrete, MultiDiscrete and MultiBinary (1-D), bounded 1-D Box.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Tuple, flatten_space

from a3c.core.spaces import Spaces
from a3c_envs.errors import EnvSetupError

_SUPPORTED_OBS = (
    "a flat 1-D Box, a uint8 image Box [C, H, W], Discrete, MultiDiscrete, MultiBinary, or a Tuple or Dict "
    "of those (their Box parts 1-D)"
)
_SUPPORTED_ACTIONS = (
    "Discrete, MultiDiscrete or MultiBinary (1-D, starting at 0), or a 1-D Box with finite bounds"
)


def _one_line(space: gym.Space) -> str:
    """The space as the error line names it: its repr with numpy's line breaks (a 2-D nvec) folded."""
    return " ".join(str(space).split())


def _flattenable_part(space: gym.Space) -> bool:
    """Whether a part of a Tuple or Dict observation flattens into a vector an MLP can take."""
    if isinstance(space, Tuple | Dict):
        parts = space.spaces.values() if isinstance(space, Dict) else space.spaces
        return len(parts) > 0 and all(_flattenable_part(part) for part in parts)
    if isinstance(space, Box):
        return len(space.shape) <= 1  # a nested image or matrix would need its own encoder (SB3: a CNN)
    return isinstance(space, Discrete | MultiDiscrete | MultiBinary)


def observation_encoding(space: gym.Space) -> str | None:
    """How observations of ``space`` reach the model (``a3c.core.spaces.OBS_ENCODINGS``), or None when they
    cannot: "none" for a Box (whether its shape fits is ``check_spaces``'s to say), "one_hot" for a
    Discrete, "flatten" for MultiDiscrete, MultiBinary and Tuple or Dict ones of flattenable parts."""
    if isinstance(space, Box):
        return "none"
    if isinstance(space, Discrete):
        return "one_hot"
    if isinstance(space, MultiDiscrete | MultiBinary | Tuple | Dict) and _flattenable_part(space):
        return "flatten"
    return None


def encode_observations(env: gym.Env) -> gym.Env:
    """``env`` with observations the model takes: unchanged when they are a Box (or cannot be encoded:
    ``check_spaces`` refuses those), else flattened into float32 [D] (a Discrete(n) as its one-hot [n])."""
    if observation_encoding(env.observation_space) in (None, "none"):
        return env
    flat = gym.wrappers.FlattenObservation(env)
    # Not DtypeObservation: it warns on every float64 flat space (a Dict of a Discrete and a float32 Box).
    bounds = flat.observation_space
    space = Box(bounds.low.astype(np.float32), bounds.high.astype(np.float32), dtype=np.float32)
    return gym.wrappers.TransformObservation(flat, partial(np.asarray, dtype=np.float32), space)


def _check_actions(env_id: str, space: gym.Space) -> None:
    ok = isinstance(space, Discrete) and int(space.start) == 0  # the policy's actions are 0..n-1
    if isinstance(space, Box):
        bounded = bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))
        ok = len(space.shape) == 1 and bounded
    elif isinstance(space, MultiDiscrete):
        ok = len(space.shape) == 1 and space.shape[0] > 0 and not np.any(space.start)
    elif isinstance(space, MultiBinary):
        ok = len(space.shape) == 1 and space.shape[0] > 0
    if not ok:
        raise EnvSetupError(
            f"--env: {env_id!r} has action space {_one_line(space)}, which is not supported yet "
            f"(supported: {_SUPPORTED_ACTIONS})"
        )


def check_spaces(env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """Accept the spaces of the module docstring (observations before ``encode_observations``); name
    anything else as not supported (EnvSetupError, one line)."""
    _check_actions(env_id, action_space)
    encoding = observation_encoding(observation_space)
    if encoding is None or (encoding == "none" and len(observation_space.shape) not in (1, 3)):
        raise EnvSetupError(
            f"--env: {env_id!r} has observation space {_one_line(observation_space)}, which is not "
            f"supported yet (supported: {_SUPPORTED_OBS})"
        )
    shape = observation_space.shape
    # The conv net takes uint8 pixels, channels first, at least 36x36 (its two strided convs).
    if (
        encoding == "none"
        and len(shape) == 3
        and not (observation_space.dtype == np.uint8 and shape[0] <= 4 and min(shape[1:]) >= 36)
    ):
        raise EnvSetupError(
            f"--env: {env_id!r} has image observations {_one_line(observation_space)}, which is not "
            "supported yet (supported: uint8 pixels [C, H, W], C <= 4, H and W >= 36; an [H, W, C] env needs "
            "a channels-first wrapper such as gymnasium.wrappers.TransformObservation)"
        )


def spaces_of(observation_space: gym.Space, action_space: gym.Space) -> Spaces:
    """The ``Spaces`` of checked observation (before ``encode_observations``) and action spaces."""
    encoding = observation_encoding(observation_space) or "none"
    encoded = observation_space if encoding == "none" else flatten_space(observation_space)
    shape = tuple(int(x) for x in encoded.shape)
    if isinstance(action_space, Discrete):
        return Spaces(shape, int(action_space.n), obs_encoding=encoding)
    if isinstance(action_space, MultiDiscrete):
        nvec = tuple(int(x) for x in action_space.nvec)
        return Spaces(shape, sum(nvec), action_nvec=nvec, obs_encoding=encoding)
    if isinstance(action_space, MultiBinary):
        return Spaces(shape, int(action_space.shape[0]), multi_binary=True, obs_encoding=encoding)
    return Spaces(
        shape,
        int(action_space.shape[0]),
        True,
        tuple(float(x) for x in action_space.low),
        tuple(float(x) for x in action_space.high),
        obs_encoding=encoding,
    )
