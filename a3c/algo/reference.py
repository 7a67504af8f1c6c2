"""One A3C update of a discrete-action actor-critic, in plain torch autograd, in one function: what the
learner computes, written to be read rather than to be fast. Training never runs it; the numpy fast path
(``a3c.algo.numpy_mlp``) and the autograd path (``a3c.algo.loss``) are tested against it
(tests/algo/test_reference.py).

A segment is T steps of B envs. For each step t in env b the update needs the observation, the action taken,
the reward, whether the episode ended there (``terminated``: a true terminal, no future value; ``truncated``:
a time limit, whose future is the value of the real last observation ``final_obs``), and, after the last
step, the observation to bootstrap from (``next_obs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from a3c.algo.rollout import Segment


def reference_update(
    model: nn.Module,
    seg: Segment,
    *,
    gamma: float,
    gae_lambda: float,
    value_coef: float,
    entropy_coef: float,
    max_grad_norm: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped gradient of one segment's A3C loss for ``model`` (obs [N, D] → (logits [N, A], values
    [N])), and the loss terms.

    Args:
        seg: a ``Segment``: obs [T, B, D], actions [T, B], rewards [T, B], terminated and truncated [T, B],
            final_obs [T, B, D] (read where truncated), next_obs [B, D].

    Returns:
        (gradient [P]: every parameter's ``.grad`` in ``model.parameters()`` order, after clipping the
        whole to an L2 norm of ``max_grad_norm``; {"policy", "value", "entropy", "total"} as floats).
    """
    obs = torch.as_tensor(seg.obs)
    steps, envs = seg.rewards.shape
    logits, values = model(obs.reshape(steps * envs, -1))
    values = values.reshape(steps, envs)

    # The value targets carry no gradient. The value of what follows step t: V(s_{t+1}) inside the segment,
    # V(next_obs) after its last step, V(final_obs) where the step was truncated, and nothing where it
    # terminated.
    with torch.no_grad():
        next_values = torch.empty(steps, envs)
        next_values[:-1] = values[1:]
        next_values[-1] = model(torch.as_tensor(seg.next_obs))[1]
        truncated = torch.as_tensor(seg.truncated)
        terminated = torch.as_tensor(seg.terminated)
        if truncated.any():
            next_values[truncated] = model(torch.as_tensor(seg.final_obs)[truncated])[1]
        next_values[terminated] = 0.0
        rewards = torch.as_tensor(seg.rewards)
        # GAE(λ), backwards over the segment; it never runs across an episode's end (λ = 1: n-step returns).
        advantages = torch.empty(steps, envs)
        running = torch.zeros(envs)
        for t in reversed(range(steps)):
            delta = rewards[t] + gamma * next_values[t] - values[t]
            carry = ~(terminated[t] | truncated[t])
            running = delta + gamma * gae_lambda * carry * running
            advantages[t] = running
        returns = advantages + values

    dist = torch.distributions.Categorical(logits=logits)
    log_probs = dist.log_prob(torch.as_tensor(seg.actions, dtype=torch.int64).reshape(-1))
    policy_loss = -(log_probs * advantages.reshape(-1)).mean()
    value_loss = ((values - returns) ** 2).mean()
    entropy = dist.entropy().mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy

    model.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    gradient = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    terms = {"policy": policy_loss.item(), "value": value_loss.item(), "entropy": entropy.item()}
    return gradient, terms | {"total": loss.item()}
