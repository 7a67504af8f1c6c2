"""One A3C update: the loss of a segment on the local model, its gradient handed to the shared model,
and the shared optimizer's step. Also the weight pull from shared to local."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from a3c.losses import LossTerms, actor_critic_loss, clip_grad_norm
from a3c.model import ActorCritic
from a3c.returns import gae
from a3c.rollout import Segment


def segment_loss(
    model: ActorCritic, seg: Segment, gamma: float, gae_lambda: float, value_coef: float, entropy_coef: float
) -> LossTerms:
    """The actor-critic loss of ``seg`` from ONE batched forward over every observation it needs.

    That batch is the T×B observations, the B observations after the last step (bootstrap values) and the
    final observations of truncated steps (their bootstrap values, DESIGN invariant 4).
    """
    steps, num_envs, obs_dim = seg.obs.shape
    n = steps * num_envs
    trunc_t, trunc_b = seg.truncated.nonzero()
    batch = torch.from_numpy(
        np.concatenate([seg.obs.reshape(n, obs_dim), seg.next_obs, seg.final_obs[trunc_t, trunc_b]])
    )
    logits, all_values = model(batch)
    values = all_values[:n].view(steps, num_envs)
    with torch.no_grad():
        next_values = torch.cat([values[1:], all_values[n : n + num_envs].unsqueeze(0)])
        if len(trunc_t):
            next_values[trunc_t, trunc_b] = all_values[n + num_envs :]
        advantages, returns = gae(
            torch.from_numpy(seg.rewards),
            values.detach(),
            next_values,
            torch.from_numpy(seg.terminated),
            torch.from_numpy(seg.truncated),
            gamma,
            gae_lambda,
        )
    return actor_critic_loss(
        logits[:n],
        values.reshape(n),
        torch.from_numpy(seg.actions.reshape(n)),
        advantages.reshape(n),
        returns.reshape(n),
        value_coef,
        entropy_coef,
    )


def compute_gradients(local_model: nn.Module, loss: torch.Tensor, max_grad_norm: float) -> float:
    """Fresh gradients of ``loss`` on the local model, clipped; returns the norm before clipping.

    ``zero_grad(set_to_none=True)`` (PyTorch 2.x's default) means every backward makes new grad tensors,
    which is why ``hand_off_gradients`` must run after every backward, not once.
    """
    local_model.zero_grad(set_to_none=True)
    loss.backward()
    return clip_grad_norm(local_model.parameters(), max_grad_norm)


def hand_off_gradients(local_model: nn.Module, shared_model: nn.Module) -> None:
    """Point each shared parameter's ``.grad`` at this update's local gradient.

    Done on every update. The popular "alias once if shared.grad is None" trick breaks on PyTorch 2.x: the
    local grads are replaced by new tensors after each ``zero_grad``, so the shared side keeps the first
    (stale) gradient forever, or, without set_to_none, a running sum of all of them.
    """
    for local, shared in zip(local_model.parameters(), shared_model.parameters(), strict=True):
        shared.grad = local.grad


@torch.no_grad()
def pull_weights(local_model: nn.Module, shared_model: nn.Module) -> None:
    """Copy the shared parameters into the local model, in place."""
    for local, shared in zip(local_model.parameters(), shared_model.parameters(), strict=True):
        local.copy_(shared)
