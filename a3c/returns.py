"""Advantage estimation for one rollout segment: GAE(λ) and n-step bootstrapped returns.

Pure tensor math. ``terminated`` and ``truncated`` stay separate (DESIGN invariant 4): a true terminal has
no future value; a time-limit cut bootstraps from V(final observation) — the observation gymnasium reports in
``info["final_obs"]``, not the reset observation that follows it.
"""

from __future__ import annotations

import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over a segment of T steps in B envs.

    Args:
        rewards: [T, B] reward of step t.
        values: [T, B] V(s_t).
        next_values: [T, B] V of the true next state of step t: V(s_{t+1}) inside the segment, the bootstrap
            value after the last step, V(final observation) where the step was truncated. Ignored where
            ``terminated``.
        terminated: [T, B] bool, the episode reached a terminal state at step t.
        truncated: [T, B] bool, the episode was cut (time limit) at step t.
        gamma: discount in (0, 1].
        gae_lambda: λ in [0, 1]. λ = 0 gives the one-step TD error; λ = 1 gives n-step returns minus V.

    Returns:
        (advantages, returns), each [T, B]; ``returns = advantages + values`` is the value target.
    """
    # The recursion must not run across an episode boundary of either kind.
    carries = (~(terminated | truncated)).to(rewards.dtype)
    deltas = rewards + gamma * torch.where(terminated, 0.0, next_values) - values
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * gae_lambda * carries[t] * running
        advantages[t] = running
    return advantages, advantages + values


def n_step_returns(
    rewards: torch.Tensor,
    bootstrap_value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Bootstrapped discounted returns of the A3C paper: R_t = r_t + γ R_{t+1}, R_T = V(s_T).

    Args:
        rewards: [T, B].
        bootstrap_value: [B] V of the observation after the last step.
        terminated: [T, B] bool; R_t = r_t there.
        truncated: [T, B] bool; R_t = r_t + γ V(final observation) there.
        final_values: [T, B] V(final observation), read only where ``truncated``.
        gamma: discount in (0, 1].

    Returns:
        [T, B] returns, equal to ``gae(..., gae_lambda=1)[1]`` for consistent inputs.
    """
    returns = torch.empty_like(rewards)
    running = bootstrap_value.to(rewards.dtype)
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = torch.where(truncated[t], final_values[t], running)
        running = torch.where(terminated[t], torch.zeros_like(running), running)
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns
