"""Env construction: helpful errors for bad ids and unsupported spaces, and SAME_STEP autoreset."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from a3c.core.errors import BadInput
from a3c_envs import EnvSetupError, inspect_env, make_env, make_eval_vector_env, make_vector_env


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
    assert issubclass(EnvSetupError, BadInput)  # one line and exit 2, ``except a3c.BadInput`` in Python


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("env_id", ["Acrobot-v0", "not an id!!"])
def test_deprecated_or_malformed_id_is_env_setup_error(env_id):
    with pytest.raises(EnvSetupError, match="--env"):
        make_env(env_id)


def test_make_env_seed_is_reproducible():
    # No seed in these resets: make_env's own seeding alone must decide the episodes that follow.
    a, b, c = (make_env("CartPole-v1", seed=s) for s in (3, 3, 4))
    reference = gym.make("CartPole-v1")
    try:
        first = a.reset()[0]
        np.testing.assert_array_equal(first, b.reset()[0])
        assert not np.array_equal(first, c.reset()[0])  # another seed, another episode
        reference.reset(seed=3)  # what make_env documents: one reset with the seed, then the user's
        np.testing.assert_array_equal(first, reference.reset()[0])
        # The action space is seeded too: 20 draws, so that a chance match cannot pass.
        assert [a.action_space.sample() for _ in range(20)] == [b.action_space.sample() for _ in range(20)]
        assert a.spec.max_episode_steps == 500  # the time limit comes with the spec
    finally:
        for env in (a, b, c, reference):
            env.close()


def test_text_observation_space_is_not_supported_yet():
    with pytest.raises(EnvSetupError) as excinfo:
        inspect_env("tests.support.space_envs:TextObs-v0")
    message = str(excinfo.value)
    assert "not supported yet" in message
    assert "'tests.support.space_envs:TextObs-v0'" in message
    assert "Text(" in message  # the space is named
    assert "1-D Box" in message and "image" in message and "Tuple or Dict" in message  # and what is supported


def test_inspect_pendulum_box_actions():
    info = inspect_env("Pendulum-v1")
    assert info.spaces.continuous and info.spaces.n_actions == 1
    assert (info.spaces.action_low, info.spaces.action_high) == ((-2.0,), (2.0,))
    assert info.spaces.obs_shape == (3,)


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


def test_serial_vector_env_matches_gymnasium_sync_vector_env():
    # Same envs, seeds and actions, with episodes that both terminate and hit a short time limit: every
    # step's arrays and every final observation agree with gymnasium's own SAME_STEP implementation.
    from functools import partial

    import gymnasium as gym
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from a3c_envs.vector import SerialVectorEnv

    fns = [partial(gym.make, "CartPole-v1", max_episode_steps=12)] * 3
    ours = SerialVectorEnv(fns)
    theirs = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    rng = np.random.default_rng(0)
    try:
        np.testing.assert_array_equal(ours.reset(seed=5)[0], theirs.reset(seed=5)[0])
        ends = {"terminated": 0, "truncated": 0}
        for _ in range(150):
            actions = rng.integers(2, size=3)
            a, b = ours.step(actions), theirs.step(actions)
            for x, y in zip(a[:4], b[:4], strict=True):
                np.testing.assert_array_equal(x, y)
            assert ("final_obs" in a[4]) == ("final_obs" in b[4])
            if "final_obs" in b[4]:
                np.testing.assert_array_equal(a[4]["_final_obs"], b[4]["_final_obs"])
                for i in np.flatnonzero(b[4]["_final_obs"]):
                    np.testing.assert_array_equal(a[4]["final_obs"][i], b[4]["final_obs"][i])
            ends["terminated"] += int(a[2].sum())
            ends["truncated"] += int(a[3].sum())
        assert ends["terminated"] > 0 and ends["truncated"] > 0, ends
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(0, 255, (96, 96, 3), np.uint8),  # channels last
        gym.spaces.Box(0.0, 1.0, (3, 64, 64), np.float32),  # not pixels
        gym.spaces.Box(0, 255, (1, 16, 16), np.uint8),  # too small for the conv net
    ],
)
def test_images_the_conv_net_cannot_take_are_refused(space):
    from a3c_envs.factory import check_spaces

    with pytest.raises(EnvSetupError, match="image observations"):
        check_spaces("Img-v0", space, gym.spaces.Discrete(3))
    check_spaces("Img-v0", gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(3))


def test_unbounded_box_actions_are_refused():
    from a3c_envs.factory import check_spaces

    with pytest.raises(EnvSetupError, match="finite bounds"):
        check_spaces("Inf-v0", gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-np.inf, np.inf, (2,)))


def test_frame_stack_is_refused_for_envs_that_are_not_images():
    # One line naming the field, the value and what is allowed; from every entry point.
    expected = "frame_stack: 4 is not allowed for CartPole-v1 (not an image env); expected 1"
    for make in (
        lambda: make_env("CartPole-v1", frame_stack=4),
        lambda: inspect_env("CartPole-v1", frame_stack=4),
        lambda: make_vector_env("CartPole-v1", 2, frame_stack=4),
        lambda: make_eval_vector_env("CartPole-v1", 2, frame_stack=4),
    ):
        with pytest.raises(EnvSetupError) as excinfo:
            make()
        assert str(excinfo.value) == expected
    # frame_stack=1 is today's env, unchanged.
    assert inspect_env("CartPole-v1", frame_stack=1).spaces.obs_shape == (4,)


@pytest.mark.parametrize("value", [0, -2, 2.0, "4", True])
def test_frame_stack_must_be_a_positive_integer(value):
    with pytest.raises(
        EnvSetupError, match=rf"^frame_stack: {value!r} is not allowed for .*; expected an integer >= 1$"
    ):
        make_env("CartPole-v1", frame_stack=value)


def test_native_is_only_for_atari_ids():
    with pytest.raises(
        EnvSetupError, match=r"^native: True is not allowed for CartPole-v1; expected an ALE/ id"
    ):
        make_vector_env("CartPole-v1", 2, native=True)
    envs = make_vector_env("CartPole-v1", 2, native=None)  # None: the native env where there is one
    try:
        assert type(envs).__name__ == "SerialVectorEnv"
    finally:
        envs.close()
