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


@dataclass(frozen=True)
class LossTerms:
    """The total loss (a tensor with gradient from autograd, a float from ``MlpGradient``) and its parts as
    floats for metrics."""

    total: torch.Tensor | float
    policy: float
    value: float
    entropy: float
    return_var: float  # Var(returns) over the segment's samples
    residual_var: float  # Var(returns - values)

    @property
    def explained_variance(self) -> float:
        """This segment's 1 − residual_var / return_var; NaN when the returns do not vary. Metrics pool the
        two variances over many updates instead (``MetricsWindow``): one segment's ratio is unstable."""
        return explained_variance(self.return_var, self.residual_var)


def a2c_loss(
    log_probs: torch.Tensor,
    entropy: torch.Tensor,
    values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    value_coef: float,
    entropy_coef: float,
) -> LossTerms:
    """policy-gradient term + value_coef × value loss − entropy_coef × mean entropy, for any policy.

    Args:
        log_probs: [N] log π(a|s) of the taken actions. entropy: [N] the policies' entropies.
        values: [N] V(s). advantages: [N]. returns: [N] value targets.
    """
    pg = policy_gradient_loss(log_probs, advantages)
    vl = value_loss(values, returns)
    ent = entropy.mean()
    total = pg + value_coef * vl - entropy_coef * ent
    return LossTerms(
        total=total,
        policy=pg.item(),
        value=vl.item(),
        entropy=ent.item(),
        return_var=float(returns.var(unbiased=False)),  # the targets carry no gradient
        residual_var=float((returns - values.detach()).var(unbiased=False)),
    )


def explained_variance(return_var: float, residual_var: float) -> float:
    """1 − Var(returns − values) / Var(returns), from those two variances (or sums of them over segments of
    equal size): 1 is a perfect critic, ≤ 0 one no better than a constant; NaN when the returns do not vary
    (nothing to explain)."""
    if not return_var > 0.0:
        return float("nan")
    return 1.0 - residual_var / return_var
