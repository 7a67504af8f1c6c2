"""Networks a user brings (``model = "tests.support.models:<name>"``, docs/api.md "Your network"): builders
``(observation_space, action_space) -> torch.nn.Module`` that keep the contract, and ones that break it."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from a3c.algo.user_model import policy_output_size


class TwoHeads(nn.Module):
    """A small ReLU MLP with a policy and a value head, for any flat observation and action space (a Box
    gets a state-independent raw log σ after its mean)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, width: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(observation_space.shape[0], width), nn.ReLU())
        box = isinstance(action_space, gym.spaces.Box)
        size = policy_output_size(action_space)
        self.policy = nn.Linear(width, size // 2 if box else size)
        self.log_std = nn.Parameter(torch.zeros(size // 2)) if box else None
        self.value = nn.Linear(width, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(obs)
        out = self.policy(features)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out, self.value(features).squeeze(-1)


def build(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """The builder a reference names: a ``TwoHeads``."""
    return TwoHeads(observation_space, action_space)


class Recurrent(nn.Module):
    """A GRU cell over a linear encoder: ``initial_state``/``step`` with one state tensor [B, H]."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden: int = 16):
        super().__init__()
        self.hidden = hidden
        self.encode = nn.Linear(observation_space.shape[0], hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.policy = nn.Linear(hidden, policy_output_size(action_space))
        self.value = nn.Linear(hidden, 1)

    def initial_state(self, batch: int) -> tuple[torch.Tensor]:
        return (torch.zeros(batch, self.hidden),)

    def step(self, obs: torch.Tensor, state: tuple[torch.Tensor]):
        h = self.cell(torch.tanh(self.encode(obs)), state[0])
        return self.policy(h), self.value(h)[:, 0], (h,)


def wrong_policy_size(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """A policy output one logit short of the action space's."""
    net = TwoHeads(observation_space, action_space)
    net.policy = nn.Linear(32, policy_output_size(action_space) - 1)
    return net


def raises(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """A builder that fails."""
    raise ValueError("this builder takes images only")


class DataDependent(TwoHeads):
    """A policy whose branch depends on the observations' values: tracing bakes in one branch."""

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, value = super().forward(obs)
        if bool(obs.sum() > 0):
            out = -out
        return out, value


class Lstm(Recurrent):
    """An LSTM cell: a state of two tensors (h, c) [B, H], as ``a3c export`` takes a recurrent one."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden: int = 16):
        super().__init__(observation_space, action_space, hidden)
        self.cell = nn.LSTMCell(hidden, hidden)

    def initial_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(batch, self.hidden), torch.zeros(batch, self.hidden)

    def step(self, obs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = self.cell(torch.tanh(self.encode(obs)), state)
        return self.policy(h), self.value(h)[:, 0], (h, c)


class OutOfMemoryInTraining(TwoHeads):
    """A ``TwoHeads`` whose forward raises what a full GPU raises, ``torch.OutOfMemoryError``, wherever it
    builds a graph (a worker's update); acting and the trainer's checks of the network run without one."""

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.is_grad_enabled():
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.19 GiB total)"
            )
        return super().forward(obs)


def out_of_memory(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """The builder a reference names: an ``OutOfMemoryInTraining``."""
    return OutOfMemoryInTraining(observation_space, action_space)
