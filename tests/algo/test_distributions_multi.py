"""MultiDiscrete (a categorical per dimension) and MultiBinary (a Bernoulli per bit) action distributions:
log-probabilities and entropies against torch.distributions, the numpy samplers' frequencies, greedy
actions, and the stored actions' shapes and dtypes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Bernoulli, Categorical

from a3c.algo.distributions import ActionDist, action_dist
from a3c_envs.space_check import spaces_of

NVECS = {"equal": (3, 3, 3), "mixed": (2, 5, 3)}


def multi_discrete(nvec: tuple[int, ...]) -> ActionDist:
    return ActionDist(False, sum(nvec), nvec=nvec)


@pytest.mark.parametrize("nvec", list(NVECS.values()), ids=list(NVECS))
def test_multi_discrete_log_prob_and_entropy_are_sums_of_categoricals(nvec):
    rng = np.random.default_rng(len(nvec) + nvec[1])
    logits = torch.tensor(rng.normal(size=(40, sum(nvec))) * 2.0)
    actions = torch.tensor(np.stack([rng.integers(n, size=40) for n in nvec], axis=1))
    log_prob, entropy = multi_discrete(nvec).log_prob_entropy(logits, actions)
    parts = [Categorical(logits=part) for part in torch.split(logits, list(nvec), dim=1)]
    expected_log_prob = sum(cat.log_prob(actions[:, k]) for k, cat in enumerate(parts))
    torch.testing.assert_close(log_prob, expected_log_prob)
    torch.testing.assert_close(entropy, sum(cat.entropy() for cat in parts))


def test_multi_binary_log_prob_and_entropy_are_sums_of_bernoullis():
    rng = np.random.default_rng(5)
    logits = torch.tensor(rng.normal(size=(40, 6)) * 3.0)
    logits[0] = torch.tensor([40.0, -40.0, 25.0, -25.0, 0.0, 1e-3])  # saturated bits stay exact
    bits = torch.tensor(rng.integers(0, 2, size=(40, 6)), dtype=torch.int8)
    bits[0] = torch.tensor([1, 0, 0, 1, 1, 0], dtype=torch.int8)
    log_prob, entropy = ActionDist(False, 6, binary=True).log_prob_entropy(logits, bits)
    reference = Bernoulli(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(bits.double()).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))


@pytest.mark.parametrize("nvec", list(NVECS.values()), ids=list(NVECS))
def test_gumbel_max_per_dimension_follows_each_softmax(nvec):
    rng = np.random.default_rng(6)
    dist = multi_discrete(nvec)
    probs = [rng.dirichlet(np.ones(n)) for n in nvec]
    logits = np.tile(np.log(np.concatenate(probs)).astype(np.float32), (40000, 1))
    actions = dist.sample(logits, dist.noise(rng, (40000,)))
    assert actions.dtype == np.int64 and actions.shape == (40000, len(nvec))
    for k, p in enumerate(probs):
        np.testing.assert_allclose(np.bincount(actions[:, k], minlength=len(p)) / 40000, p, atol=0.01)


def test_logistic_noise_draws_each_bit_with_its_sigmoid():
    rng = np.random.default_rng(7)
    dist = ActionDist(False, 3, binary=True)
    logits = np.tile(np.array([[-1.5, 0.0, 2.0]], np.float32), (40000, 1))
    bits = dist.sample(logits, dist.noise(rng, (40000,)))
    assert bits.dtype == np.int8 and bits.shape == (40000, 3)
    np.testing.assert_allclose(bits.mean(0), 1 / (1 + np.exp(-np.array([-1.5, 0.0, 2.0]))), atol=0.01)


def test_greedy_is_the_argmax_per_dimension_and_the_bits_above_zero():
    out = np.array([[0.1, 0.9, -1.0, 0.2, 0.3], [2.0, 1.0, 0.5, 0.4, -3.0]], np.float32)
    dist = multi_discrete((2, 3))
    np.testing.assert_array_equal(dist.greedy(out), [[1, 2], [0, 0]])
    assert dist.env_action(dist.greedy(out)).dtype == np.int64  # what the env takes, as it is
    bits = ActionDist(False, 5, binary=True).greedy(out)
    assert bits.dtype == np.int8
    np.testing.assert_array_equal(bits, [[1, 1, 0, 1, 1], [1, 1, 1, 1, 0]])


@pytest.mark.parametrize(
    "space, kind, shape, dtype",
    [
        (gym.spaces.Discrete(4), "discrete", (), np.int64),
        (gym.spaces.MultiDiscrete([3, 4]), "multi_discrete", (2,), np.int64),
        (gym.spaces.MultiBinary(5), "multi_binary", (5,), np.int8),
        (gym.spaces.Box(-1.0, 1.0, (2,)), "box", (2,), np.float32),
    ],
)
def test_the_distribution_of_a_space_matches_its_checkpointed_spaces(space, kind, shape, dtype):
    # The rollout builds its distribution from the env's space; export and checkpoints from the saved Spaces.
    dist = action_dist(space, "tanh")
    spaces = spaces_of(gym.spaces.Box(-1.0, 1.0, (3,)), space)
    assert dist == ActionDist.of_spaces(spaces, "tanh")
    assert dist.kind == spaces.action_kind == kind
    assert (dist.action_shape, dist.action_dtype) == (shape, dtype)
    assert dist.out_size == (4 if kind == "box" else sum(space.nvec) if kind == "multi_discrete" else dist.n)
    assert space.contains(dist.env_action(dist.greedy(np.zeros((1, dist.out_size), np.float32)))[0])
