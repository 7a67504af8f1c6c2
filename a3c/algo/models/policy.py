"""The acting side of a model: observations [B, ...] → policy outputs [B, P] as numpy, with no gradient.

An MLP acts through its numpy twin (``a3c.algo.models.numpy_mlp.NumpyMlp.policy_output``, ~8 µs a step); other
models (conv nets, LSTMs) through torch, and a recurrent one carries its per-env state between calls.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from a3c.algo.models.mlp_model import ActorCritic
from a3c.algo.models.numpy_mlp import NumpyMlp


class TorchPolicy:
    """Acts with a torch model's ``step``; a recurrent model's state for B envs lives here.

    ``state()`` is a copy of the state before the next call (what a segment stores to unroll from);
    ``reset(ended)`` zeroes the state of the envs whose episode ended (in greedy play: that lost a life, too).
    """

    def __init__(self, model: nn.Module, num_envs: int):
        self.model = model
        self.recurrent = bool(getattr(model, "recurrent", False))
        self.num_envs = num_envs
        self._state = model.initial_state(num_envs) if self.recurrent else None

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Observations [B, ...] → policy outputs [B, P]; a recurrent model's state advances one step."""
        out, _, self._state = self.model.step(torch.from_numpy(obs), self._state)
        return out.numpy()

    def state(self) -> tuple[torch.Tensor, ...] | None:
        """A copy of the recurrent state ([B, H] tensors) before the next call; None when feed-forward."""
        return None if self._state is None else tuple(x.clone() for x in self._state)

    def reset(self, ended: np.ndarray | None = None) -> None:
        """Zero the state of the envs where ``ended`` [B] is True (all of them when None)."""
        if self._state is None:
            return
        if ended is None:
            self._state = self.model.initial_state(self.num_envs)
            return
        keep = torch.from_numpy(~ended).float().unsqueeze(1)
        self._state = tuple(x * keep for x in self._state)


def make_policy(model: nn.Module, num_envs: int) -> Callable[[np.ndarray], np.ndarray]:
    """The fastest way ``model`` acts for ``num_envs`` envs at once (see the module docstring)."""
    if isinstance(model, ActorCritic):
        return NumpyMlp(model).policy_output
    return TorchPolicy(model, num_envs)
