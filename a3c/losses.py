"""The advantage actor-critic loss, one small function per term (means over the N samples of a segment)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def policy_gradient_loss(log_probs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """-E[log π(a|s) · A]; ``log_probs`` [N] of the taken actions, ``advantages`` [N] (no gradient)."""
    return -(log_probs * advantages.detach()).mean()


def value_loss(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """Mean squared error between V(s) [N] and the value targets [N] (no gradient through the targets)."""
    return F.mse_loss(values, returns.detach())


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the categorical policies given by ``logits`` [N, A]."""
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean()


@dataclass(frozen=True)
class LossTerms:
    """The total loss (a tensor with gradient from autograd, a float from ``MlpGradient``) and its parts as
    floats for metrics."""

    total: torch.Tensor | float
    policy: float
    value: float
    entropy: float
    explained_variance: float


def actor_critic_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    value_coef: float,
    entropy_coef: float,
) -> LossTerms:
    """policy-gradient term + value_coef × value loss − entropy_coef × entropy.

    Args:
        logits: [N, A] policy logits. values: [N] V(s). actions: [N] int64 taken actions.
        advantages: [N]. returns: [N] value targets.
    """
    log_probs = F.log_softmax(logits, dim=-1).gather(1, actions.unsqueeze(1)).squeeze(1)
    pg = policy_gradient_loss(log_probs, advantages)
    vl = value_loss(values, returns)
    ent = categorical_entropy(logits)
    total = pg + value_coef * vl - entropy_coef * ent
    return LossTerms(
        total=total,
        policy=pg.item(),
        value=vl.item(),
        entropy=ent.item(),
        explained_variance=explained_variance(values.detach(), returns.detach()),
    )


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """1 − Var(returns − values) / Var(returns) for [N] tensors: 1 is a perfect critic, ≤ 0 one no better
    than a constant; NaN when the returns do not vary (nothing to explain)."""
    var = returns.var(unbiased=False)
    if float(var) == 0.0:
        return float("nan")
    return float(1.0 - (returns - values).var(unbiased=False) / var)
