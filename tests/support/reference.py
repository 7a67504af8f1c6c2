"""Plain reference implementations the algo tests check the package against — none of them runs in training.

- ``n_step_returns``: the A3C paper's bootstrapped returns, a loop over T (``a3c.algo.rollout.gae`` with
  λ = 1 must give the same returns).
- ``reference_gae``: GAE as the forward sum it is defined by, in pure Python.
- ``categorical_entropy`` and ``actor_critic_loss``: the categorical policy's entropy and loss from logits,
  through ``a3c.algo.loss.a2c_loss`` (the package reaches it through ``ActionDist.log_prob_entropy``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from a3c.algo.loss import LossTerms, a2c_loss


def n_step_returns(
    rewards: np.ndarray,
    bootstrap_value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    final_values: np.ndarray,
    gamma: float,
) -> np.ndarray:
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
    returns = np.empty_like(rewards)
    running = bootstrap_value.astype(rewards.dtype)
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = np.where(truncated[t], final_values[t], running)
        running = np.where(terminated[t], 0.0, running)
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def reference_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """GAE advantages [T, B] as the forward sum A_t = Σ_k (γλ)^(k-t) δ_k up to and including the step that
    ends the episode; the inputs are ``gae``'s ([T, B] each)."""
    steps, envs = rewards.shape
    r, v, nv = rewards.tolist(), values.tolist(), next_values.tolist()
    term, trunc = terminated.tolist(), truncated.tolist()
    adv = [[0.0] * envs for _ in range(steps)]
    for b in range(envs):
        for s in range(steps):
            total, coef = 0.0, 1.0
            for k in range(s, steps):
                future = 0.0 if term[k][b] else nv[k][b]
                total += coef * (r[k][b] + gamma * future - v[k][b])
                if term[k][b] or trunc[k][b]:
                    break
                coef *= gamma * lam
            adv[s][b] = total
    return np.array(adv)


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy (a scalar) of the categorical policies given by ``logits`` [N, A]."""
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean()


def actor_critic_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    value_coef: float,
    entropy_coef: float,
) -> LossTerms:
    """``a2c_loss`` of a categorical policy given by ``logits`` [N, A] and the taken ``actions`` [N] int64;
    ``values``, ``advantages``, ``returns`` [N]."""
    log_p = F.log_softmax(logits, dim=-1)
    log_probs = log_p.gather(1, actions.unsqueeze(1)).squeeze(1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return a2c_loss(log_probs, entropy, values, advantages, returns, value_coef, entropy_coef)
