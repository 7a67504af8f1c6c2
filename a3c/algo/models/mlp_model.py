"""Actor-critic MLP for flat observations, in torch: a policy output (categorical logits, or a Gaussian's
mean and log σ; see ``a3c.algo.models.distributions``) and a state value. Its numpy twin, what workers act and
(categorical) learn with, is ``a3c.algo.models.numpy_mlp``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from a3c.algo.models.distributions import raw_log_std


def _mlp(in_dim: int, hidden_sizes: Sequence[int]) -> tuple[nn.Sequential, int]:
    """A tanh body [N, in_dim] → [N, width] (Linear + Tanh per hidden size) and its output width."""
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [orthogonal_init(nn.Linear(in_dim, size), math.sqrt(2)), nn.Tanh()]
        in_dim = size
    return nn.Sequential(*layers), in_dim


def orthogonal_init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights and zero bias for a Linear or Conv layer; returns it. The policy heads take a small
    gain (as in SB3 and CleanRL): a near-uniform first policy."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def with_log_std(head: torch.Tensor, log_std: nn.Parameter | None) -> torch.Tensor:
    """The policy output from a policy head's [N, A]: itself, or (mean, a learned state-independent raw log σ)
    as [N, 2A] when the model has ``log_std``."""
    if log_std is None:
        return head
    return torch.cat([head, log_std.expand_as(head)], dim=-1)


class ActorCritic(nn.Module):
    """π(a|s) and V(s) from flat observations, with one shared body or separate policy and value bodies.

    Args:
        obs_dim: length of the flat observation.
        n_actions: number of discrete actions, or of action dimensions when ``continuous``.
        hidden_sizes: widths of the hidden tanh layers of each body.
        shared_body: one body feeds both heads (fewer FLOPs) instead of two separate bodies.
        continuous: a Gaussian policy: the output is (mean [A], log σ [A]) instead of logits [A].
        state_std: Gaussian only: log σ is a second output of the policy head (state-dependent) instead of
            one learned parameter vector (state-independent, as in the A3C paper's continuous variant's
            successors: PPO, SB3, CleanRL).
        init_log_std: Gaussian only: log σ at initialisation (stored raw: ``distributions.raw_log_std``).
    """

    recurrent = False

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        shared_body: bool = False,
        continuous: bool = False,
        state_std: bool = False,
        init_log_std: float = 0.0,
    ):
        super().__init__()
        self.shared_body = shared_body
        self.policy_body, width = _mlp(obs_dim, hidden_sizes)
        self.value_body = self.policy_body if shared_body else _mlp(obs_dim, hidden_sizes)[0]
        head_size = 2 * n_actions if continuous and state_std else n_actions
        self.policy_head = orthogonal_init(nn.Linear(width, head_size), 0.01)
        self.value_head = orthogonal_init(nn.Linear(width, 1), 1.0)
        self.log_std = None
        if continuous:
            if state_std:
                with torch.no_grad():
                    self.policy_head.bias[n_actions:] = raw_log_std(init_log_std)
            else:
                self.log_std = nn.Parameter(torch.full((n_actions,), raw_log_std(init_log_std)))

    def policy_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """[N, obs_dim] → the policy output [N, P] (the rollout needs no value)."""
        return with_log_std(self.policy_head(self.policy_body(obs)), self.log_std)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, obs_dim] → (policy output [N, P], values [N])."""
        policy_features = self.policy_body(obs)
        value_features = policy_features if self.shared_body else self.value_body(obs)
        out = with_log_std(self.policy_head(policy_features), self.log_std)
        return out, self.value_head(value_features).squeeze(-1)
