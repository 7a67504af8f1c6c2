"""The advantage actor-critic loss: one small function per term (means over the N samples of a segment),
``a2c_loss`` their sum, and the autograd path of an update: the loss of a segment on any model
(``segment_loss``) and its clipped gradient into the flat buffer (``compute_gradients``). The MLP with
discrete actions may take the numpy closed form instead (``a3c.algo.numpy_mlp``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from a3c.algo.distributions import ActionDist
from a3c.algo.optim import clip_flat_grad
from a3c.algo.rollout import Segment, segment_batch, segment_targets
from a3c.core.devices import model_device, to_device


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


def segment_loss(
    model: nn.Module,
    seg: Segment,
    gamma: float,
    gae_lambda: float,
    value_coef: float,
    entropy_coef: float,
    dist: ActionDist | None = None,
) -> LossTerms:
    """The actor-critic loss of ``seg``: ONE batched forward over ``segment_batch(seg)``, or, for a recurrent
    model, one unroll of the segment from its stored initial state. ``dist``: the action distribution
    (default: categorical over the model's outputs), whose ``penalty`` (a Box's pulls on log σ and the mean)
    joins the total."""
    n = seg.rewards.size
    device = model_device(model)  # the batches go where the model is (the same memory on the CPU)
    if getattr(model, "recurrent", False):
        trunc_t, trunc_b = seg.truncated.nonzero()
        out, all_values = model.unroll(
            to_device(seg.obs, device),
            seg.init_state,
            seg.terminated | seg.truncated,
            to_device(seg.next_obs, device),
            to_device(seg.final_obs[trunc_t, trunc_b], device),
            (trunc_t, trunc_b),
        )
    else:
        out, all_values = model(to_device(segment_batch(seg), device))
    # The targets need no gradient: GAE runs in numpy on the detached values.
    advantages, returns = segment_targets(seg, all_values.detach().cpu().numpy(), gamma, gae_lambda)
    dist = dist or ActionDist(False, out.shape[1])
    actions = to_device(seg.actions.reshape(n, *seg.actions.shape[2:]), device)
    log_probs, entropy = dist.log_prob_entropy(out[:n], actions)
    terms = a2c_loss(
        log_probs,
        entropy,
        all_values[:n],
        to_device(advantages.reshape(n), device),
        to_device(returns.reshape(n), device),
        value_coef,
        entropy_coef,
    )
    if dist.continuous:
        terms = dataclasses.replace(terms, total=terms.total + dist.penalty(out[:n]))
    return terms


def compute_gradients(loss: torch.Tensor, flat_grad: torch.Tensor, max_grad_norm: float) -> float:
    """The gradient of ``loss`` into ``flat_grad`` (the local model's gradient buffer, ``attach_flat_grad``),
    clipped; returns the norm before clipping.

    The buffer is zeroed in place, not set to None, so the parameters' ``.grad`` views stay views of it.
    """
    flat_grad.zero_()
    loss.backward()
    return clip_flat_grad(flat_grad, max_grad_norm)
