"""The shapes a model is built for, read from an env's spaces and saved in checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Spaces:
    """The shapes a model is built for, read from an env's spaces (and saved in checkpoints).

    obs_shape: one observation's shape: (D,) flat, or (C, H, W) an image (uint8 pixels, scaled in the model).
    n_actions: Discrete: the number of actions; Box: the number of action dimensions.
    continuous: Box actions (a Gaussian policy) instead of Discrete ones (a categorical policy).
    action_low, action_high: a Box's bounds per dimension (empty for Discrete).
    """

    obs_shape: tuple[int, ...]
    n_actions: int
    continuous: bool = False
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @property
    def obs_dim(self) -> int:
        """The number of values in one observation."""
        return int(np.prod(self.obs_shape))

    @property
    def image(self) -> bool:
        """Image observations ([C, H, W]), for a conv net."""
        return len(self.obs_shape) == 3

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain lists and numbers, for a checkpoint."""
        return {
            "obs_shape": list(self.obs_shape),
            "n_actions": self.n_actions,
            "continuous": self.continuous,
            "action_low": list(self.action_low),
            "action_high": list(self.action_high),
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Spaces:
        """Rebuild spaces saved with ``to_dict``."""
        return cls(
            tuple(int(x) for x in values["obs_shape"]),
            int(values["n_actions"]),
            bool(values["continuous"]),
            tuple(float(x) for x in values["action_low"]),
            tuple(float(x) for x in values["action_high"]),
        )

    @classmethod
    def of_checkpoint(cls, data: dict[str, Any]) -> Spaces:
        """The spaces a checkpoint was trained for (one from before "spaces" existed: a flat Discrete env)."""
        if "spaces" in data:
            return cls.from_dict(data["spaces"])
        return cls((int(data["obs_dim"]),), int(data["n_actions"]))
