"""The numpy twin of the MLP policy (``NumpyMlp.policy_output``, what every worker acts with) against the
torch ``forward`` the loss differentiates: both heads, both bodies, random weights and inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.networks import ActorCritic
from a3c.algo.numpy_mlp import NumpyMlp, make_policy

OBS_DIM, N_ACTIONS = 5, 3

# (continuous, state_std): categorical logits; Gaussian with a learned log σ vector; Gaussian whose log σ is
# a second output of the policy head.
HEADS = {"categorical": (False, False), "gaussian-learned": (True, False), "gaussian-state": (True, True)}


def randomized(model: ActorCritic, seed: int) -> ActorCritic:
    """Every parameter drawn at random: the init's zero biases, 0.01-gain head and constant log σ would let
    a twin that skips a bias or mixes up the log σ halves still match."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.7)
    return model


def make(head: str, shared_body: bool, hidden_sizes=(16, 8), seed: int = 0, activation="tanh") -> ActorCritic:
    continuous, state_std = HEADS[head]
    torch.manual_seed(seed)
    model = ActorCritic(
        OBS_DIM, N_ACTIONS, hidden_sizes, shared_body, continuous, state_std, -0.5, activation
    )
    return randomized(model, seed)


def observations(batch: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((batch, OBS_DIM)) * 2).astype(np.float32)


def torch_out(model: ActorCritic, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out, _ = model(torch.from_numpy(obs))
    return out.numpy()


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("shared_body", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("hidden_sizes", [(16, 8), (7,)], ids=["two-layers", "one-layer"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_numpy_twin_equals_the_torch_forward(head, shared_body, hidden_sizes, activation):
    for seed in range(3):
        model = make(head, shared_body, hidden_sizes, seed, activation)
        twin = NumpyMlp(model).policy_output
        for batch in (1, 4, 16):
            obs = observations(batch, seed * 100 + batch)
            expected = torch_out(model, obs)
            got = twin(obs)
            assert got.shape == expected.shape == (batch, 2 * N_ACTIONS if HEADS[head][0] else N_ACTIONS)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("head", list(HEADS))
def test_numpy_twin_sees_in_place_weight_changes(head):
    """A worker makes its twin once and then pulls shared weights into the model in place: the twin must act
    with the pulled weights, not the ones it was made from."""
    model = make(head, shared_body=False)
    twin = NumpyMlp(model).policy_output
    randomized(model, seed=99)  # the pull: new values, same tensors
    obs = observations(8, 1)
    np.testing.assert_allclose(twin(obs), torch_out(model, obs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("head", list(HEADS))
def test_make_policy_acts_with_the_twin_for_an_mlp(head):
    model = make(head, shared_body=True)
    policy = make_policy(model, num_envs=4)
    obs = observations(4, 2)
    np.testing.assert_allclose(policy(obs), torch_out(model, obs), rtol=1e-5, atol=1e-6)


def test_the_twin_does_not_read_the_value_body():
    """With separate bodies, changing only the value side leaves the policy output (torch and twin) alone."""
    model = make("gaussian-learned", shared_body=False)
    twin = NumpyMlp(model).policy_output
    obs = observations(6, 3)
    before = twin(obs).copy()
    with torch.no_grad():
        for param in [*model.value_body.parameters(), *model.value_head.parameters()]:
            param.add_(1.0)
    np.testing.assert_array_equal(twin(obs), before)
    np.testing.assert_allclose(before, torch_out(model, obs), rtol=1e-5, atol=1e-6)
