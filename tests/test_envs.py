"""Env construction: helpful errors for bad ids and unsupported spaces, and SAME_STEP autoreset."""

from __future__ import annotations

import numpy as np
import pytest

from envs import EnvSetupError, inspect_env, make_env, make_vector_env


def test_unknown_id_suggests_close_match():
    with pytest.raises(EnvSetupError) as excinfo:
        make_env("CartPol-v1")
    message = str(excinfo.value)
    assert "'CartPol-v1'" in message
    assert "did you mean" in message and "CartPole-v1" in message


def test_unknown_id_without_close_match_points_to_registry():
    with pytest.raises(EnvSetupError, match="pprint_registry"):
        make_env("Zzzqqq-v0")


def test_env_setup_error_is_bad_input():
    assert issubclass(EnvSetupError, ValueError)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("env_id", ["Acrobot-v0", "not an id!!"])
def test_deprecated_or_malformed_id_is_env_setup_error(env_id):
    with pytest.raises(EnvSetupError, match="--env"):
        make_env(env_id)


def test_make_env_seed_is_reproducible():
    a, b = make_env("CartPole-v1", seed=3), make_env("CartPole-v1", seed=3)
    try:
        np.testing.assert_array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0])
        assert a.spec.max_episode_steps == 500  # the time limit comes with the spec
    finally:
        a.close()
        b.close()


def test_continuous_action_space_is_not_supported_yet():
    with pytest.raises(EnvSetupError) as excinfo:
        inspect_env("Pendulum-v1")
    message = str(excinfo.value)
    assert "not supported yet" in message
    assert "'Pendulum-v1'" in message
    assert "Box(" in message  # the space is named
    assert "Discrete" in message  # and what is supported


def test_inspect_cartpole():
    info = inspect_env("CartPole-v1")
    assert (info.env_id, info.obs_dim, info.n_actions) == ("CartPole-v1", 4, 2)
    assert info.reward_threshold == 475.0 and info.max_episode_steps == 500


def _cartpole_is_terminal(obs: np.ndarray) -> bool:
    # CartPole-v1 terminates when |x| > 2.4 or |theta| > 12 degrees (0.2095 rad).
    return abs(obs[0]) > 2.4 or abs(obs[2]) > 12 * 2 * np.pi / 360


def test_vector_env_same_step_reports_final_obs():
    num_envs = 3
    envs = make_vector_env("CartPole-v1", num_envs)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (num_envs, 4)
        actions = np.zeros(num_envs, dtype=np.int64)  # always push left: every episode falls within ~30 steps
        for _ in range(200):
            obs, rewards, terminated, truncated, info = envs.step(actions)
            if terminated.any():
                break
        else:
            pytest.fail("no CartPole episode terminated in 200 steps of a constant action")

        assert not truncated.any()
        assert "final_obs" in info and "_final_obs" in info
        np.testing.assert_array_equal(info["_final_obs"], terminated | truncated)
        for i in range(num_envs):
            if terminated[i]:
                final = np.asarray(info["final_obs"][i])
                assert final.shape == (4,)
                assert _cartpole_is_terminal(final), final  # the real last observation
                assert not np.allclose(final, obs[i])  # not the reset observation returned in its place
                assert np.all(np.abs(obs[i]) <= 0.05), obs[i]  # CartPole resets uniformly in [-0.05, 0.05]
            else:
                assert not _cartpole_is_terminal(obs[i])

        # SAME_STEP: the next step continues from the reset observation; no step is spent on a reset.
        next_obs, rewards, *_ = envs.step(actions)
        assert np.all(rewards == 1.0)
    finally:
        envs.close()
