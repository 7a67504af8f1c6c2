"""The shapes a model is built for, read from an env's spaces and saved in checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# How an env's observation reaches the model: "none" (a Box, as it is), "one_hot" (a Discrete as a one-hot
# float32 vector), "flatten" (MultiDiscrete, MultiBinary, Tuple or Dict: gymnasium.spaces.flatten, which
# one-hots every Discrete and MultiDiscrete part, as Stable-Baselines3 does).
OBS_ENCODINGS = ("none", "one_hot", "flatten")


def action_kind(continuous: bool, nvec: tuple[int, ...], binary: bool) -> str:
    """An action space's kind: "discrete", "box", "multi_discrete" or "multi_binary"."""
    if continuous:
        return "box"
    if nvec:
        return "multi_discrete"
    return "multi_binary" if binary else "discrete"


@dataclass(frozen=True)
class Spaces:
    """The shapes a model is built for, read from an env's spaces (and saved in checkpoints).

    obs_shape: one observation's shape as the model sees it: (D,) flat, or (C, H, W) an image (uint8 pixels,
        scaled in the model). A one-hot or flattened observation is flat (``obs_encoding``).
    n_actions: the policy head's outputs per observation: Discrete(n): n logits; Box: the number of action
        dimensions (a mean each); MultiDiscrete(nvec): sum(nvec) logits; MultiBinary(n): n bit logits.
    continuous: Box actions (a Gaussian policy) instead of discrete ones.
    action_low, action_high: a Box's bounds per dimension (empty otherwise).
    action_nvec: MultiDiscrete: the number of choices per action dimension (empty otherwise).
    multi_binary: MultiBinary actions: ``n_actions`` independent bits.
    obs_encoding: one of ``OBS_ENCODINGS``: how the env's observation became ``obs_shape``.
    """

    obs_shape: tuple[int, ...]
    n_actions: int
    continuous: bool = False
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    action_nvec: tuple[int, ...] = ()
    multi_binary: bool = False
    obs_encoding: str = "none"

    @property
    def obs_dim(self) -> int:
        """The number of values in one observation."""
        return int(np.prod(self.obs_shape))

    @property
    def image(self) -> bool:
        """Image observations ([C, H, W]), for a conv net."""
        return len(self.obs_shape) == 3

    @property
    def action_kind(self) -> str:
        """The action space's kind (``action_kind``)."""
        return action_kind(self.continuous, self.action_nvec, self.multi_binary)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain lists and numbers, for a checkpoint."""
        return {
            "obs_shape": list(self.obs_shape),
            "n_actions": self.n_actions,
            "continuous": self.continuous,
            "action_low": list(self.action_low),
            "action_high": list(self.action_high),
            "action_nvec": list(self.action_nvec),
            "multi_binary": self.multi_binary,
            "obs_encoding": self.obs_encoding,
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Spaces:
        """Rebuild spaces saved with ``to_dict`` (one saved before MultiDiscrete, MultiBinary and encoded
        observations existed lacks their keys: a Discrete or Box env with Box observations)."""
        return cls(
            tuple(int(x) for x in values["obs_shape"]),
            int(values["n_actions"]),
            bool(values["continuous"]),
            tuple(float(x) for x in values["action_low"]),
            tuple(float(x) for x in values["action_high"]),
            tuple(int(x) for x in values.get("action_nvec", ())),
            bool(values.get("multi_binary", False)),
            str(values.get("obs_encoding", "none")),
        )

    @classmethod
    def of_checkpoint(cls, data: dict[str, Any]) -> Spaces:
        """The spaces a checkpoint was trained for (one from before "spaces" existed: a flat Discrete env)."""
        if "spaces" in data:
            return cls.from_dict(data["spaces"])
        return cls((int(data["obs_dim"]),), int(data["n_actions"]))
