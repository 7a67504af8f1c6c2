"""The factorised heads (MultiDiscrete, MultiBinary) through the acting and learning path: the numpy twin
equals the torch forward, greedy actions agree, the rollout stores what the env took, and the closed-form
numpy update equals autograd's in a Learner stepping real test envs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.distributions import ActionDist
from a3c.algo.learner import Learner, build_model, build_shared
from a3c.algo.numpy_mlp import NumpyMlp
from a3c.core.config import Config
from a3c_envs import inspect_env
from tests.algo.test_policy_twin import randomized, torch_out

COPY_BITS = "tests.support.space_envs:CopyBits-v0"
MATCH_CHOICES = "tests.support.space_envs:MatchChoices-v0"
SPACE_ENVS = [COPY_BITS, MATCH_CHOICES]


@pytest.mark.parametrize("env_id", SPACE_ENVS)
@pytest.mark.parametrize("shared_body", [False, True], ids=["separate", "shared"])
def test_numpy_twin_and_greedy_actions_equal_torch(env_id, shared_body):
    spaces = inspect_env(env_id).spaces
    dist = ActionDist.of_spaces(spaces)
    config = Config(env_id=env_id, hidden_sizes=(16, 8), shared_body=shared_body).validate()
    model = randomized(build_model(config, spaces), seed=4)
    twin = NumpyMlp(model).policy_output
    obs = np.random.default_rng(1).standard_normal((32, spaces.obs_dim)).astype(np.float32)
    expected = torch_out(model, obs)
    got = twin(obs)
    assert got.shape == expected.shape == (32, spaces.n_actions)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(dist.greedy(got), dist.greedy(expected))


def space_learner(env_id: str, numpy_grad: bool, activation: str = "tanh") -> Learner:
    config = Config(
        env_id=env_id, envs_per_worker=3, t_max=4, numpy_grad=numpy_grad, activation=activation
    ).validate()
    torch.manual_seed(0)
    model, optimizer = build_shared(config, inspect_env(env_id).spaces)
    return Learner(config, model, optimizer, seed=5)


@pytest.mark.parametrize(
    ("env_id", "activation"), [(COPY_BITS, "tanh"), (MATCH_CHOICES, "tanh"), (MATCH_CHOICES, "relu")]
)
def test_numpy_and_autograd_gradients_make_the_same_update(env_id, activation):
    a = space_learner(env_id, numpy_grad=True, activation=activation)
    b = space_learner(env_id, numpy_grad=False, activation=activation)
    try:
        assert a.numpy_grad is not None and b.numpy_grad is None
        assert a.local_model.activation == b.local_model.activation == activation
        for _ in range(3):
            ra, rb = a.update(), b.update()
            assert ra.grad_norm == pytest.approx(rb.grad_norm, rel=1e-4)
            assert ra.policy_loss == pytest.approx(rb.policy_loss, rel=1e-4, abs=1e-6)
            assert ra.entropy == pytest.approx(rb.entropy, rel=1e-4)
        torch.testing.assert_close(a.shared_flat, b.shared_flat, rtol=1e-4, atol=1e-6)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize(
    "env_id, shape, dtype", [(COPY_BITS, (4,), np.int8), (MATCH_CHOICES, (2,), np.int64)]
)
def test_the_rollout_stores_the_actions_the_env_took(env_id, shape, dtype):
    lrn = space_learner(env_id, numpy_grad=True)
    try:
        seg, _ = lrn.collector.collect(lrn.policy)
        assert seg.actions.shape == (4, 3, *shape) and seg.actions.dtype == dtype
        space = lrn.collector.envs.single_action_space
        assert all(space.contains(a) for a in seg.actions.reshape(-1, *shape).astype(space.dtype))
        # A fresh policy is near uniform: both bits, and most of the 4 categories, show up somewhere.
        assert len(np.unique(seg.actions)) >= (2 if env_id == COPY_BITS else 3)
        assert ((seg.rewards >= 0) & (seg.rewards <= 1)).all() and seg.obs.dtype == np.float32
    finally:
        lrn.close()
