"""The actor-critic loss terms against torch.distributions, and gradient-norm clipping."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical

from a3c.losses import (
    actor_critic_loss,
    categorical_entropy,
    clip_grad_norm,
    policy_gradient_loss,
    value_loss,
)


def random_batch(n=9, a=4, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(n, a, generator=g, dtype=torch.float64)).requires_grad_()
    values = torch.randn(n, generator=g, dtype=torch.float64).requires_grad_()
    actions = torch.randint(0, a, (n,), generator=g)
    advantages = torch.randn(n, generator=g, dtype=torch.float64)
    returns = torch.randn(n, generator=g, dtype=torch.float64)
    return logits, values, actions, advantages, returns


def reference_terms(logits, values, actions, advantages, returns):
    dist = Categorical(logits=logits)
    pg = -(dist.log_prob(actions) * advantages).mean()
    vl = ((values - returns) ** 2).mean()
    ent = dist.entropy().mean()
    return pg, vl, ent


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shape", [(1, 2), (9, 4), (32, 7)])
def test_parts_match_categorical(seed, shape):
    logits, values, actions, advantages, returns = random_batch(*shape, seed=seed)
    terms = actor_critic_loss(logits, values, actions, advantages, returns, value_coef=0.5, entropy_coef=0.01)
    pg, vl, ent = reference_terms(logits, values, actions, advantages, returns)
    assert terms.policy == pytest.approx(pg.item(), rel=1e-9, abs=1e-12)
    assert terms.value == pytest.approx(vl.item(), rel=1e-9, abs=1e-12)
    assert terms.entropy == pytest.approx(ent.item(), rel=1e-9, abs=1e-12)
    assert (
        isinstance(terms.policy, float)
        and isinstance(terms.value, float)
        and isinstance(terms.entropy, float)
    )


@pytest.mark.parametrize(("value_coef", "entropy_coef"), [(0.5, 0.01), (1.0, 0.0), (0.25, 0.1), (0.0, 1.0)])
def test_total_is_weighted_sum_with_matching_gradients(value_coef, entropy_coef):
    logits, values, actions, advantages, returns = random_batch(seed=3)
    terms = actor_critic_loss(logits, values, actions, advantages, returns, value_coef, entropy_coef)
    assert terms.total.item() == pytest.approx(
        terms.policy + value_coef * terms.value - entropy_coef * terms.entropy, rel=1e-9, abs=1e-12
    )

    pg, vl, ent = reference_terms(logits, values, actions, advantages, returns)
    expected = pg + value_coef * vl - entropy_coef * ent
    assert terms.total.item() == pytest.approx(expected.item(), rel=1e-9, abs=1e-12)
    got = torch.autograd.grad(terms.total, (logits, values))
    want = torch.autograd.grad(expected, (logits, values))
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


def test_entropy_sign_and_bounds():
    # Uniform logits: entropy log(A); a near-deterministic policy: entropy near 0. The bonus lowers the total.
    uniform = torch.zeros(3, 5)
    assert categorical_entropy(uniform).item() == pytest.approx(math.log(5))
    peaked = torch.tensor([[50.0, 0.0, 0.0]])
    assert categorical_entropy(peaked).item() == pytest.approx(0.0, abs=1e-12)
    logits, values, actions, advantages, returns = random_batch(seed=4)
    without = actor_critic_loss(logits, values, actions, advantages, returns, 0.5, 0.0).total.item()
    with_bonus = actor_critic_loss(logits, values, actions, advantages, returns, 0.5, 0.1).total.item()
    assert with_bonus < without


def test_no_gradient_flows_into_advantages_or_returns():
    logits, values, actions, advantages, returns = random_batch(seed=5)
    advantages.requires_grad_()
    returns.requires_grad_()
    terms = actor_critic_loss(logits, values, actions, advantages, returns, 0.5, 0.01)
    terms.total.backward()
    assert advantages.grad is None and returns.grad is None
    assert logits.grad is not None and values.grad is not None


def test_single_terms_by_hand():
    # pg: -mean(log_probs * adv) = -((-1)*2 + (-3)*(-1))/2 = -(-2 + 3)/2 = -0.5
    assert policy_gradient_loss(
        torch.tensor([-1.0, -3.0]), torch.tensor([2.0, -1.0])
    ).item() == pytest.approx(-0.5)
    # vl: mean((1-3)^2, (2-2)^2) = (4 + 0)/2 = 2
    assert value_loss(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 2.0])).item() == pytest.approx(2.0)


# -- clip_grad_norm ------------------------------------------------------------------------------------------


def params_with_grads():
    # Global norm: sqrt(3^2 + 4^2 + 12^2) = sqrt(169) = 13.
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(1, 1))
    a.grad = torch.tensor([3.0, 4.0])
    b.grad = torch.tensor([[12.0]])
    return [a, b]


def global_norm(params):
    return math.sqrt(sum(float((p.grad**2).sum()) for p in params))


def test_clip_returns_pre_clip_norm_and_clips_to_max_norm():
    params = params_with_grads()
    norm = clip_grad_norm(params, max_norm=1.3)
    assert isinstance(norm, float)
    assert norm == pytest.approx(13.0)
    assert global_norm(params) == pytest.approx(1.3, rel=1e-5)
    # Direction kept: every component scaled by 1.3/13 = 0.1.
    torch.testing.assert_close(params[0].grad, torch.tensor([0.3, 0.4]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(params[1].grad, torch.tensor([[1.2]]), rtol=1e-5, atol=1e-6)


def test_clip_below_max_norm_is_untouched():
    params = params_with_grads()
    assert clip_grad_norm(params, max_norm=20.0) == pytest.approx(13.0)
    torch.testing.assert_close(params[0].grad, torch.tensor([3.0, 4.0]))
    torch.testing.assert_close(params[1].grad, torch.tensor([[12.0]]))


@pytest.mark.parametrize("max_norm", [0.0, -1.0])
def test_non_positive_max_norm_disables_clipping(max_norm):
    params = params_with_grads()
    assert clip_grad_norm(params, max_norm=max_norm) == pytest.approx(13.0)
    torch.testing.assert_close(params[0].grad, torch.tensor([3.0, 4.0]))
    torch.testing.assert_close(params[1].grad, torch.tensor([[12.0]]))


def test_clip_accepts_a_generator_of_parameters():
    model = torch.nn.Linear(3, 2)
    for p in model.parameters():
        p.grad = torch.full_like(p, 2.0)  # 8 entries of 2: norm sqrt(8 * 4) = sqrt(32)
    assert clip_grad_norm(model.parameters(), 1.0) == pytest.approx(math.sqrt(32))
    assert global_norm(list(model.parameters())) == pytest.approx(1.0, rel=1e-5)
