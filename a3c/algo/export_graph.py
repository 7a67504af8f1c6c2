"""The whole greedy policy as one torch module: raw observations → the action the env takes.

It computes what ``a3c.algo.evaluation.play_greedy`` does step by step — the run's observation
normalisation (when it had one), the network, and the greedy action mapping — as one graph that can be traced
and saved (``a3c export``: ONNX or TorchScript) and then runs without this package.

Inputs and outputs (N: a batch of envs, any size):
- ``obs`` [N, *obs_shape]: float32 for flat observations, uint8 pixels for images (as the env gives them).
- ``action``: int64 [N] for Discrete (argmax of the logits), int64 [N, D] for MultiDiscrete (argmax per
  dimension), int8 [N, n] for MultiBinary (logit > 0), float32 [N, A] for Box (the Gaussian's mean,
  clipped or tanh-squashed into the bounds, as ``config.squash`` says).
- a recurrent (conv-LSTM) policy also takes ``h``, ``c`` float32 [N, H] (zeros at an episode's start) and
  returns the next ``h``, ``c`` after ``action``.
"""

from __future__ import annotations

import torch
from torch import nn

from a3c.algo.distributions import ActionDist
from a3c.algo.networks import ActorCritic
from a3c.algo.normalize import OBS_CLIP, OBS_VAR_EPS, RunningMeanStd


def greedy_action(out: torch.Tensor, dist: ActionDist, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """The most likely action of each policy output ``out`` [N, P], as the env takes it: the torch twin of
    ``ActionDist.greedy``. Discrete: argmax → int64 [N] (the first of equal logits, as numpy's).
    MultiDiscrete: the argmax of each dimension's slice of the logits → int64 [N, D]. MultiBinary: the bits
    whose logit is > 0 → int8 [N, n]. Box: the mean [N, A] clipped to [low, high] or squashed as
    ``low + (tanh(u) + 1)(high - low)/2`` → float32. ``low``, ``high``: the bounds [A] (float32; unused but
    for Box)."""
    if dist.nvec:
        return torch.stack([part.argmax(dim=-1) for part in out.split(list(dist.nvec), dim=-1)], dim=-1)
    if dist.binary:
        return (out > 0).to(torch.int8)
    if not dist.continuous:
        return out.argmax(dim=-1)
    mean = out[:, : dist.n]
    if dist.squash == "tanh":
        return low + (torch.tanh(mean) + 1.0) * 0.5 * (high - low)
    return torch.minimum(torch.maximum(mean, low), high)  # elementwise bounds: Clip takes scalars only


class ObsNormalize(nn.Module):
    """``RunningMeanStd.normalize`` with frozen statistics: float32 [N, *shape] → float32 [N, *shape].

    In float64 like the numpy original, (obs - mean) / sqrt(var + eps) clipped to ±clip, so the exported
    graph feeds the network the very same numbers."""

    def __init__(self, stats: RunningMeanStd, clip: float = OBS_CLIP):
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", stats.mean.clone())
        self.register_buffer("std", torch.sqrt(stats.var + OBS_VAR_EPS))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalise a batch [N, *shape]."""
        z = (obs.double() - self.mean) / self.std
        return z.clamp(-self.clip, self.clip).float()


class GreedyPolicy(nn.Module):
    """A feed-forward model's greedy policy: ``forward(obs)`` → ``action`` (see the module docstring).

    Args:
        model: an ``ActorCritic`` or a ``ConvActorCritic`` without an LSTM (in eval mode).
        dist: the env's ``ActionDist`` (its squash included).
        obs_stats: the run's observation statistics; None when it did not normalise.
    """

    def __init__(self, model: nn.Module, dist: ActionDist, obs_stats: RunningMeanStd | None = None):
        super().__init__()
        self.model, self.dist = model, dist
        self.normalize = nn.Identity() if obs_stats is None else ObsNormalize(obs_stats)
        self.register_buffer("low", torch.tensor(dist.low, dtype=torch.float32))
        self.register_buffer("high", torch.tensor(dist.high, dtype=torch.float32))

    def policy_output(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations [N, ...] → the policy output [N, P] (only the policy head is computed)."""
        x = self.normalize(obs)
        if isinstance(self.model, ActorCritic):
            return self.model.policy_logits(x)
        return self.model.step(x, None)[0]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [N, *obs_shape] → action: [N] or [N, D] int64, [N, n] int8, [N, A] float32."""
        return greedy_action(self.policy_output(obs), self.dist, self.low, self.high)


class RecurrentGreedyPolicy(GreedyPolicy):
    """A conv-LSTM's greedy policy: ``forward(obs, h, c)`` → ``(action, h, c)``, the state after this step.

    The caller carries the state: zeros [N, H] at each env's episode start, as ``TorchPolicy`` does.
    """

    def forward(  # type: ignore[override]  # the state travels with the observation
        self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """obs [N, *obs_shape], h and c [N, H] → (action, next h [N, H], next c [N, H])."""
        out, _, (h, c) = self.model.step(self.normalize(obs), (h, c))
        return greedy_action(out, self.dist, self.low, self.high), h, c


def greedy_module(
    model: nn.Module, dist: ActionDist, obs_stats: RunningMeanStd | None = None
) -> GreedyPolicy:
    """The greedy policy of ``model`` (recurrent or not) as one module, in eval mode."""
    cls = RecurrentGreedyPolicy if getattr(model, "recurrent", False) else GreedyPolicy
    return cls(model, dist, obs_stats).eval()
