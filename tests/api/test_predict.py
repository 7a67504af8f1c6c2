"""``Policy.predict``: the most likely action or a seeded draw from the policy, and an LSTM's state kept by
the policy (``predict(obs)``) or carried by the caller (``predict(obs, state, episode_start)``, as SB3's).
Policies built in memory around small models: no run, no env."""

from __future__ import annotations

import numpy as np
import pytest

from a3c.core.errors import BadInput
from tests.api.policies import box_policy, discrete_policy, gru_policy, lstm_policy


def frames(steps: int, batch: int) -> np.ndarray:
    return np.random.default_rng(1).integers(0, 256, (steps, batch, 1, 36, 36), dtype=np.uint8)


def test_deterministic_plays_the_most_likely_action_and_sampling_draws_from_the_policy():
    policy = discrete_policy(0.8, seed=3)
    obs = np.zeros((4000, 4), np.float32)
    assert (policy.predict(obs) == 0).all()
    assert (policy.predict(obs, deterministic=True) == 0).all()
    drawn = policy.predict(obs, deterministic=False)
    assert drawn.shape == (4000,) and drawn.dtype == np.int64
    assert abs((drawn == 0).mean() - 0.8) < 0.03  # 4000 draws: 0.03 is 4.7 standard errors
    assert np.shape(policy.predict(obs[0], deterministic=False)) == ()


def test_the_draws_follow_the_seed():
    obs = np.zeros((50, 4), np.float32)
    first = discrete_policy(0.5, seed=7).predict(obs, deterministic=False)
    assert np.array_equal(first, discrete_policy(0.5, seed=7).predict(obs, deterministic=False))
    policy = discrete_policy(0.5, seed=8)
    assert not np.array_equal(first, policy.predict(obs, deterministic=False))
    policy.seed(7)
    assert np.array_equal(first, policy.predict(obs, deterministic=False))


def test_a_box_policy_draws_inside_the_bounds_around_its_mean():
    policy = box_policy(seed=0)
    obs = np.zeros((500, 3), np.float32)
    mean = policy.predict(obs)
    drawn = policy.predict(obs, deterministic=False)
    assert drawn.shape == (500, 1) and drawn.dtype == np.float32
    assert ((drawn >= -2.0) & (drawn <= 2.0)).all() and len(np.unique(drawn)) > 400
    assert np.unique(mean).size == 1 and abs(float(np.mean(drawn)) - float(mean[0, 0])) < 0.15


def test_a_feed_forward_policy_in_the_explicit_form_returns_no_state():
    policy = discrete_policy()
    action, state = policy.predict(np.zeros(4, np.float32), state=None, episode_start=np.array([True]))
    assert np.shape(action) == () and state is None


def test_the_explicit_state_steps_as_the_kept_one():
    kept, carried = lstm_policy(), lstm_policy()
    obs = frames(6, 2)
    state, starts = None, np.ones(2, bool)
    for t in range(6):
        expected = kept.predict(obs[t])
        action, state = carried.predict(obs[t], state=state, episode_start=starts)
        starts = np.zeros(2, bool)
        assert np.array_equal(action, expected), t
        assert [s.shape for s in state] == [(2, 8), (2, 8)]
    assert kept._acting and not carried._acting  # the explicit form keeps nothing in the policy


def test_episode_start_zeroes_the_state_of_those_envs_only():
    policy = lstm_policy()
    obs = frames(3, 2)
    _, state = policy.predict(obs[0], episode_start=np.ones(2, bool))
    _, state = policy.predict(obs[1], state=state)
    _, fresh = policy.predict(obs[2], episode_start=np.ones(2, bool))
    _, restarted = policy.predict(obs[2], state=state, episode_start=np.array([True, False]))
    _, went_on = policy.predict(obs[2], state=state)
    np.testing.assert_array_equal(restarted[0][0], fresh[0][0])
    np.testing.assert_array_equal(restarted[0][1], went_on[0][1])
    assert not np.allclose(restarted[0][1], fresh[0][1])


def test_a_state_of_another_shape_is_bad_input():
    policy = lstm_policy()
    with pytest.raises(BadInput, match=r"^state: shapes \(1, 8\), \(1, 8\) are not allowed; expected"):
        policy.predict(frames(1, 2)[0], state=(np.zeros((1, 8), np.float32), np.zeros((1, 8), np.float32)))
    with pytest.raises(BadInput, match=r"^episode_start: shape \(3,\) is not allowed; expected \[2\]"):
        policy.predict(frames(1, 2)[0], episode_start=np.ones(3, bool))


def test_a_recurrent_network_of_ones_own_carries_its_own_state_tuple():
    kept, carried = gru_policy(), gru_policy()
    obs = np.random.default_rng(2).normal(size=(5, 3, 4)).astype(np.float32)
    state, starts = None, np.ones(3, bool)
    for t in range(5):
        expected = kept.predict(obs[t])
        action, state = carried.predict(obs[t], state=state, episode_start=starts)
        starts = np.zeros(3, bool)
        assert np.array_equal(action, expected), t
        assert [s.shape for s in state] == [(3, 16)]  # the GRU's one tensor, not an LSTM's (h, c)
    with pytest.raises(BadInput, match=r"^state: shapes \(3, 8\) are not allowed; expected \(3, 16\)"):
        carried.predict(obs[0], state=(np.zeros((3, 8), np.float32),))
