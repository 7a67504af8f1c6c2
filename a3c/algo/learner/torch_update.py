"""One A3C update's torch side: the loss of a segment on the local model by autograd (any model; the
categorical MLP may take the numpy closed form of ``a3c.algo.fast.mlp_grad`` instead), the gradient into the
flat buffer, its hand-off to the shared model before the shared optimizer's step, and the weight pull from
shared to local."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from a3c.algo.loss.losses import LossTerms, a2c_loss
from a3c.algo.loss.segment import Segment, segment_batch, segment_targets
from a3c.algo.models.distributions import ActionDist
from a3c.algo.shared.flat import clip_flat_grad


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
    (default: categorical over the model's outputs), whose ``mean_penalty`` joins the total."""
    n = seg.rewards.size
    if getattr(model, "recurrent", False):
        trunc_t, trunc_b = seg.truncated.nonzero()
        out, all_values = model.unroll(
            torch.from_numpy(seg.obs),
            seg.init_state,
            seg.terminated | seg.truncated,
            torch.from_numpy(seg.next_obs),
            torch.from_numpy(seg.final_obs[trunc_t, trunc_b]),
            (trunc_t, trunc_b),
        )
    else:
        out, all_values = model(torch.from_numpy(segment_batch(seg)))
    # The targets need no gradient: GAE runs in numpy on the detached values.
    advantages, returns = segment_targets(seg, all_values.detach().numpy(), gamma, gae_lambda)
    dist = dist or ActionDist(False, out.shape[1])
    actions = torch.from_numpy(seg.actions.reshape(n, *seg.actions.shape[2:]))
    log_probs, entropy = dist.log_prob_entropy(out[:n], actions)
    terms = a2c_loss(
        log_probs,
        entropy,
        all_values[:n],
        torch.from_numpy(advantages.reshape(n)),
        torch.from_numpy(returns.reshape(n)),
        value_coef,
        entropy_coef,
    )
    if dist.pulls_mean:
        terms = dataclasses.replace(terms, total=terms.total + dist.mean_penalty(out[:n]))
    return terms


def compute_gradients(loss: torch.Tensor, flat_grad: torch.Tensor, max_grad_norm: float) -> float:
    """The gradient of ``loss`` into ``flat_grad`` (the local model's gradient buffer, ``attach_flat_grad``),
    clipped; returns the norm before clipping.

    The buffer is zeroed in place, not set to None, so the parameters' ``.grad`` views stay views of it.
    """
    flat_grad.zero_()
    loss.backward()
    return clip_flat_grad(flat_grad, max_grad_norm)


def hand_off_gradients(flat_grad: torch.Tensor, shared_flat: torch.Tensor) -> None:
    """Point the shared flat parameter's ``.grad`` at this update's local gradient, before each step.

    Done on every update. The popular "alias once if shared.grad is None" trick breaks on PyTorch 2.x:
    ``zero_grad`` sets local grads to None, so the shared side keeps the first (stale) gradient forever,
    or, without set_to_none, a running sum of all of them. Here the local gradient is one buffer zeroed in
    place, and the hand-off is explicit each time anyway.
    """
    shared_flat.grad = flat_grad


@torch.no_grad()
def pull_weights(local_flat: torch.Tensor, shared_flat: torch.Tensor) -> None:
    """Copy the shared parameters into the local model's flat buffer, in place (one op)."""
    local_flat.copy_(shared_flat)
