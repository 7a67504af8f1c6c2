"""Both gradient paths of a worker's update (the numpy closed form the MLP takes for discrete heads, and
autograd for every model) give the gradient and loss terms of the plain reference update
(``a3c.algo.reference``) on the same model and segment: every policy head, and the conv LSTM's unroll."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from a3c.algo.distributions import ActionDist
from a3c.algo.loss import compute_gradients, segment_loss
from a3c.algo.networks import ActorCritic, ConvActorCritic
from a3c.algo.numpy_mlp import MlpGradient
from a3c.algo.optim import attach_flat_grad, clip_flat_grad, flatten_parameters
from a3c.algo.reference import reference_update
from a3c.algo.rollout import Segment
from tests.algo.test_conv_model import SHAPE
from tests.algo.test_mlp_grad import model_with_grad
from tests.support.segments import random_segment

HYPER = {"gamma": 0.97, "gae_lambda": 0.9, "value_coef": 0.5, "entropy_coef": 0.02}
DISCRETE = {
    "categorical": ActionDist(False, 3),
    "multi-discrete": ActionDist(False, 10, nvec=(2, 5, 3)),
    "multi-binary": ActionDist(False, 4, binary=True),
}
LOW, HIGH = (-2.0, 0.0), (2.0, 0.5)  # unequal ranges: the squash's affine part differs per dimension


def box(squash: str, mean_l2_coef: float = 0.0) -> ActionDist:
    return ActionDist(True, 2, LOW, HIGH, squash, mean_l2_coef=mean_l2_coef)


def autograd_update(model, seg, hyper, max_grad_norm, dist):
    """The package's autograd path on ``model``: (clipped flat gradient, LossTerms)."""
    grad = attach_flat_grad(model, flatten_parameters(model))
    loss = segment_loss(model, seg, *hyper.values(), dist)
    compute_gradients(loss.total, grad, max_grad_norm)
    return grad, loss


def assert_terms(loss, terms):
    total = loss.total if isinstance(loss.total, float) else loss.total.item()
    assert total == pytest.approx(terms["total"], rel=1e-5, abs=1e-6)
    for name in ("policy", "value", "entropy"):
        assert getattr(loss, name) == pytest.approx(terms[name], rel=1e-5, abs=1e-6), name


def box_samples(rng, shape: tuple[int, ...]) -> np.ndarray:
    """Gaussian samples ``u`` [*shape, 2] as a segment stores them, some far out in tanh's tails."""
    return (2.0 * rng.normal(size=(*shape, 2))).astype(np.float32)


@pytest.mark.parametrize("dist_name", list(DISCRETE))
@pytest.mark.parametrize("max_grad_norm", [40.0, 0.05])  # 0.05: the clip scales the gradient
@pytest.mark.parametrize(
    "steps,num_envs,shared_body,gae_lambda", [(5, 16, False, 0.9), (20, 1, True, 0.9), (8, 4, False, 1.0)]
)
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_both_gradient_paths_give_the_reference_gradient(
    dist_name, steps, num_envs, shared_body, gae_lambda, max_grad_norm, activation
):
    dist, hyper = DISCRETE[dist_name], HYPER | {"gae_lambda": gae_lambda}
    rng = np.random.default_rng(steps + num_envs)
    seg = random_segment(rng, steps, num_envs, 4, dist)
    assert seg.truncated.any() and seg.terminated.any()  # both kinds of episode end are in the segment
    model, grad = model_with_grad(2, 4, dist.n, (16, 16), shared_body, activation)
    # relu: some units are off for some rows (where its derivative is 0) and on for others.
    assert activation == "tanh" or 0 < (model.policy_body(torch.from_numpy(seg.obs)) > 0).float().mean() < 1
    with torch.no_grad():
        model.policy_head.weight.mul_(3.0)  # policies far from uniform
    reference = copy.deepcopy(model)
    expected, terms = reference_update(reference, seg, **hyper, max_grad_norm=max_grad_norm, dist=dist)
    assert expected.shape == grad.shape

    grad.fill_(123.0)  # the fast path writes the whole buffer
    fast = MlpGradient(model, dist).loss_and_grad(seg, *hyper.values())
    clip_flat_grad(grad, max_grad_norm)
    # relu's larger activations: float32 sums in another order differ by up to ~1.4e-7 near 0.
    atol = 1e-7 if activation == "tanh" else 1e-6
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=atol)
    assert_terms(fast, terms)

    autograd_grad, loss = autograd_update(copy.deepcopy(reference), seg, hyper, max_grad_norm, dist)
    torch.testing.assert_close(autograd_grad, expected, rtol=1e-5, atol=atol)
    assert_terms(loss, terms)


@pytest.mark.parametrize("state_std", [False, True], ids=["fixed-std", "state-std"])
@pytest.mark.parametrize("squash,mean_l2_coef", [("clip", 0.0), ("clip", 0.1), ("tanh", 0.0), ("tanh", 0.1)])
def test_autograd_gives_the_reference_gradient_of_a_gaussian_mlp(squash, mean_l2_coef, state_std):
    rng = np.random.default_rng(7)
    seg = random_segment(rng, 6, 4, 3, ActionDist(False, 2))
    seg.actions = box_samples(rng, (6, 4))
    assert seg.truncated.any() and seg.terminated.any()
    torch.manual_seed(3)
    model = ActorCritic(3, 2, (16,), continuous=True, state_std=state_std, init_log_std=-0.5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))  # means and σ that vary, some means out in tanh's tails
        # The first dimension's raw log σ out where its bound is flat (about -7.5): the pull on it in play.
        raw_log_std = model.policy_head.bias[2:] if state_std else model.log_std
        raw_log_std[0] -= 7.0
    dist = box(squash, mean_l2_coef)
    expected, terms = reference_update(copy.deepcopy(model), seg, **HYPER, max_grad_norm=40.0, dist=dist)
    # The mean's pull is a term of the tanh squash only; the log σ's, of both.
    assert (terms["mean_penalty"] > 0) == (squash == "tanh" and mean_l2_coef > 0)
    assert terms["log_std_penalty"] > 0

    grad, loss = autograd_update(model, seg, HYPER, 40.0, dist)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-6)
    assert_terms(loss, terms)


@pytest.mark.parametrize(
    "lstm_size,dist",
    [(8, None), (8, box("clip")), (8, box("tanh", 0.1)), (0, None)],
    ids=["lstm-discrete", "lstm-box-clip", "lstm-box-tanh", "no-lstm-discrete"],
)
def test_autograd_gives_the_reference_gradient_of_the_conv_model(lstm_size, dist):
    """The conv net; with an LSTM, unrolled from a non-zero initial state through both kinds of episode end,
    one of each at the last step (where V(next_obs) must not reach the targets)."""
    rng = np.random.default_rng(11)
    steps, num_envs, n_actions = 4, 3, 3 if dist is None else 2
    seg = Segment.allocate(steps, num_envs, SHAPE, 0 if dist is None else 2, np.uint8)
    seg.obs[:] = rng.integers(0, 256, size=seg.obs.shape)
    seg.final_obs[:] = rng.integers(0, 256, size=seg.final_obs.shape)
    seg.next_obs[:] = rng.integers(0, 256, size=seg.next_obs.shape)
    if dist is None:
        seg.actions[:] = rng.integers(n_actions, size=seg.actions.shape)
    else:
        seg.actions[:] = box_samples(rng, (steps, num_envs))
    seg.rewards[:] = rng.normal(size=seg.rewards.shape)
    seg.terminated[1, 0] = seg.terminated[3, 1] = True
    seg.truncated[0, 2] = seg.truncated[2, 0] = seg.truncated[3, 2] = True
    torch.manual_seed(5)
    model = ConvActorCritic(SHAPE, n_actions, lstm_size, continuous=dist is not None)
    with torch.no_grad():
        for head in (model.policy_head, model.value_head):
            head.weight.add_(0.3 * torch.randn_like(head.weight))
    if lstm_size:
        seg.init_state = (torch.randn(num_envs, lstm_size), torch.randn(num_envs, lstm_size))

    expected, terms = reference_update(copy.deepcopy(model), seg, **HYPER, max_grad_norm=0.5, dist=dist)
    grad, loss = autograd_update(model, seg, HYPER, 0.5, dist)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-6)
    assert_terms(loss, terms)
