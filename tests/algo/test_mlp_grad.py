"""The numpy loss-and-gradient of the MLP actor-critic equals torch autograd's on the same segment."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.distributions import ActionDist
from a3c.algo.loss import compute_gradients, segment_loss
from a3c.algo.networks import ActorCritic
from a3c.algo.numpy_mlp import MlpGradient
from a3c.algo.optim import attach_flat_grad, flatten_parameters
from a3c.algo.rollout import Segment
from tests.support.segments import random_segment


def model_with_grad(seed, obs_dim, n_actions, hidden, shared_body, activation="tanh"):
    torch.manual_seed(seed)
    model = ActorCritic(obs_dim, n_actions, hidden, shared_body, activation=activation)
    with torch.no_grad():  # non-trivial heads (the init makes the policy head nearly zero)
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    flat = flatten_parameters(model)
    return model, attach_flat_grad(model, flat)


@pytest.mark.parametrize("shared_body", [False, True])
@pytest.mark.parametrize(
    "steps,num_envs,obs_dim,n_actions,hidden,entropy_coef",
    [
        (20, 1, 4, 2, (64, 64), 0.01),
        (5, 16, 4, 2, (64, 64), 0.0),
        (8, 3, 7, 5, (32,), 0.05),
        (3, 2, 3, 3, (16, 8, 4), 0.1),
    ],
)
def test_gradient_and_terms_match_autograd(
    shared_body, steps, num_envs, obs_dim, n_actions, hidden, entropy_coef
):
    rng = np.random.default_rng(steps * 100 + num_envs)
    seg = random_segment(rng, steps, num_envs, obs_dim, ActionDist(False, n_actions))
    assert_matches_autograd(seg, (0.97, 0.9, 0.5, entropy_coef), obs_dim, n_actions, hidden, shared_body)


def assert_matches_autograd(
    seg: Segment,
    args: tuple[float, float, float, float],
    obs_dim: int,
    n_logits: int,
    hidden: tuple[int, ...],
    shared_body: bool,
    dist: ActionDist | None = None,
    logit_scale: float = 1.0,
) -> None:
    """MlpGradient's gradient [params] and loss terms on ``seg`` equal autograd's on the same model (``args``:
    gamma, lambda, value and entropy coefficients); the policy head scaled by ``logit_scale`` in both."""
    extra = () if dist is None else (dist,)
    reference, ref_grad = model_with_grad(1, obs_dim, n_logits, hidden, shared_body)
    model, grad = model_with_grad(1, obs_dim, n_logits, hidden, shared_body)
    with torch.no_grad():
        reference.policy_head.weight.mul_(logit_scale)
        model.policy_head.weight.mul_(logit_scale)
    ref_terms = segment_loss(reference, seg, *args, *extra)
    ref_norm = compute_gradients(ref_terms.total, ref_grad, max_grad_norm=0.0)

    grad.fill_(123.0)  # loss_and_grad must overwrite the whole buffer, not add to it
    terms = MlpGradient(model, *extra).loss_and_grad(seg, *args)

    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
    assert float(torch.linalg.vector_norm(grad)) == pytest.approx(ref_norm, rel=1e-4)
    # float32: with numpy 2.4.6 the policy term of x4 logits differed from torch's by 1.2e-5 (relative): the
    # terms get the gradient's tolerance.
    assert terms.total == pytest.approx(ref_terms.total.item(), rel=1e-4, abs=1e-6)
    for name in ("policy", "value", "entropy", "explained_variance"):
        assert getattr(terms, name) == pytest.approx(getattr(ref_terms, name), rel=1e-4, abs=1e-6), name


def test_needs_the_flat_gradient_buffer():
    with pytest.raises(ValueError, match="attach_flat_grad"):
        MlpGradient(ActorCritic(4, 2))
