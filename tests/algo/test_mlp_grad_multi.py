"""The numpy loss-and-gradient of the MLP equals torch autograd's for the factorised heads: one categorical
per MultiDiscrete dimension, and one Bernoulli per MultiBinary bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.distributions import ActionDist
from a3c.algo.mlp_grad import MlpGradient
from a3c.algo.segment import Segment
from a3c.algo.update import compute_gradients, segment_loss
from tests.algo.test_mlp_grad import model_with_grad

DISTS = {
    "multi-discrete-equal": ActionDist(False, 9, nvec=(3, 3, 3)),
    "multi-discrete-mixed": ActionDist(False, 10, nvec=(2, 5, 3)),
    "multi-binary": ActionDist(False, 4, binary=True),
    "one-bit": ActionDist(False, 1, binary=True),
}


def random_actions(rng: np.random.Generator, dist: ActionDist, shape: tuple[int, int]) -> np.ndarray:
    if dist.nvec:
        return np.stack([rng.integers(n, size=shape) for n in dist.nvec], axis=-1)
    return rng.integers(0, 2, size=(*shape, dist.n)).astype(np.int8)


def random_segment(rng, steps, num_envs, obs_dim, dist: ActionDist) -> Segment:
    seg = Segment.allocate(steps, num_envs, obs_dim, dist.action_shape[0], np.float32, dist.action_dtype)
    seg.obs[:] = rng.normal(size=seg.obs.shape)
    seg.actions[:] = random_actions(rng, dist, (steps, num_envs))
    seg.rewards[:] = rng.normal(size=seg.rewards.shape)
    seg.terminated[:] = rng.random(seg.terminated.shape) < 0.1
    seg.truncated[:] = ~seg.terminated & (rng.random(seg.truncated.shape) < 0.1)
    seg.final_obs[:] = rng.normal(size=seg.final_obs.shape)
    seg.next_obs[:] = rng.normal(size=seg.next_obs.shape)
    return seg


@pytest.mark.parametrize("dist_name", list(DISTS))
@pytest.mark.parametrize("shared_body", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize(
    "steps,num_envs,obs_dim,hidden,entropy_coef",
    [(20, 1, 4, (32, 32), 0.05), (5, 16, 3, (16, 8, 4), 0.0)],
)
def test_gradient_and_terms_match_autograd(
    dist_name, shared_body, steps, num_envs, obs_dim, hidden, entropy_coef
):
    dist = DISTS[dist_name]
    rng = np.random.default_rng(steps * 100 + num_envs)
    seg = random_segment(rng, steps, num_envs, obs_dim, dist)
    args = (0.97, 0.9, 0.5, entropy_coef)

    reference, ref_grad = model_with_grad(1, obs_dim, dist.n, hidden, shared_body)
    with torch.no_grad():  # logits large enough that the bits and choices are far from uniform
        reference.policy_head.weight.mul_(4.0)
    ref_terms = segment_loss(reference, seg, *args, dist)
    ref_norm = compute_gradients(ref_terms.total, ref_grad, max_grad_norm=0.0)

    model, grad = model_with_grad(1, obs_dim, dist.n, hidden, shared_body)
    with torch.no_grad():
        model.policy_head.weight.mul_(4.0)
    grad.fill_(123.0)  # loss_and_grad must overwrite the whole buffer, not add to it
    terms = MlpGradient(model, dist).loss_and_grad(seg, *args)

    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
    assert float(torch.linalg.vector_norm(grad)) == pytest.approx(ref_norm, rel=1e-4)
    assert terms.total == pytest.approx(ref_terms.total.item(), rel=1e-5, abs=1e-6)
    for name in ("policy", "value", "entropy", "explained_variance"):
        assert getattr(terms, name) == pytest.approx(getattr(ref_terms, name), rel=1e-5, abs=1e-6), name


def test_box_actions_have_no_closed_form():
    model, _ = model_with_grad(0, 3, 2, (8,), False)
    with pytest.raises(ValueError, match="autograd"):
        MlpGradient(model, ActionDist(True, 2, (-1.0, -1.0), (1.0, 1.0)))
