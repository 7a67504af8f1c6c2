"""The actor-critic loss terms (``a2c_loss`` through the categorical reference ``actor_critic_loss``) against
torch.distributions."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical

from a3c.algo.loss import policy_gradient_loss, value_loss
from tests.support.reference import actor_critic_loss, categorical_entropy


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
