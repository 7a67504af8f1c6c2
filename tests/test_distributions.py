"""Action distributions against torch.distributions, and Box actions staying in bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Independent, Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform, TanhTransform

from a3c.distributions import ActionDist


def gaussian_out(rng: np.random.Generator, n: int, dims: int) -> torch.Tensor:
    mean = rng.normal(size=(n, dims))
    log_std = rng.uniform(-2.0, 1.0, size=(n, dims))
    return torch.tensor(np.concatenate([mean, log_std], axis=1), dtype=torch.float64)


@pytest.mark.parametrize("dims", [1, 3, 6])
def test_gaussian_log_prob_and_entropy_match_torch_distributions(dims):
    rng = np.random.default_rng(dims)
    out = gaussian_out(rng, 64, dims)
    actions = torch.tensor(rng.normal(size=(64, dims)) * 2.0)
    dist = ActionDist(True, dims, (-1.0,) * dims, (1.0,) * dims, "clip")
    log_prob, entropy = dist.log_prob_entropy(out, actions)
    reference = Independent(Normal(out[:, :dims], out[:, dims:].exp()), 1)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())


def test_tanh_squashed_log_prob_matches_the_transformed_distribution():
    rng = np.random.default_rng(0)
    dims, low, high = 2, (-2.0, 0.0), (2.0, 1.0)
    out = gaussian_out(rng, 32, dims)
    u = torch.tensor(rng.normal(size=(32, dims)))
    dist = ActionDist(True, dims, low, high, "tanh")
    log_prob, _ = dist.log_prob_entropy(out, u)
    scale = (torch.tensor(high) - torch.tensor(low)) / 2
    loc = torch.tensor(low) + scale
    squashed = TransformedDistribution(
        Normal(out[:, :dims], out[:, dims:].exp()), [TanhTransform(), AffineTransform(loc, scale)]
    )
    action = torch.tensor(dist.env_action(u.numpy()), dtype=torch.float64)
    # The density of the action the env got; 1e-6 inside the log keeps saturated tanh finite.
    torch.testing.assert_close(log_prob, squashed.log_prob(action).sum(-1), rtol=1e-4, atol=1e-4)


def test_categorical_log_prob_and_entropy_match_torch_distributions():
    rng = np.random.default_rng(1)
    logits = torch.tensor(rng.normal(size=(50, 4)))
    actions = torch.tensor(rng.integers(4, size=50))
    log_prob, entropy = ActionDist(False, 4).log_prob_entropy(logits, actions)
    reference = Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_box_actions_stay_in_bounds(squash):
    rng = np.random.default_rng(2)
    low, high = (-2.0, -0.5, 0.0), (2.0, 0.5, 10.0)
    dist = ActionDist(True, 3, low, high, squash)
    out = np.concatenate([rng.normal(size=(1000, 3)) * 5, np.full((1000, 3), 1.5)], axis=1).astype(np.float32)
    u = dist.sample(out.copy(), dist.noise(rng, (1000,)))
    actions = dist.env_action(u)
    assert actions.dtype == np.float32 and actions.shape == (1000, 3)
    assert (actions >= np.array(low, np.float32)).all() and (actions <= np.array(high, np.float32)).all()
    greedy = dist.greedy(out)
    assert (greedy >= np.array(low, np.float32)).all() and (greedy <= np.array(high, np.float32)).all()


def test_numpy_gaussian_samples_have_the_policy_mean_and_std():
    rng = np.random.default_rng(3)
    dist = ActionDist(True, 2, (-5.0, -5.0), (5.0, 5.0))
    out = np.tile(np.array([[0.5, -1.0, np.log(0.3), np.log(2.0)]], np.float32), (20000, 1))
    u = dist.sample(out, dist.noise(rng, (20000,)))
    np.testing.assert_allclose(u.mean(0), [0.5, -1.0], atol=0.05)
    np.testing.assert_allclose(u.std(0), [0.3, 2.0], rtol=0.03)


def test_gumbel_max_samples_follow_the_softmax():
    rng = np.random.default_rng(4)
    dist = ActionDist(False, 3)
    logits = np.tile(np.log(np.array([[0.2, 0.5, 0.3]], np.float32)), (30000, 1))
    actions = dist.sample(logits, dist.noise(rng, (30000,)))
    np.testing.assert_allclose(np.bincount(actions, minlength=3) / 30000, [0.2, 0.5, 0.3], atol=0.01)
