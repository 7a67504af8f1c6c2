"""Atari frame stacking (``frame_stack=k``): shapes, order, resets, and the spaces inspect_env reports."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.support.extras import require_extra

require_extra("ale_py", "atari")

from gymnasium.wrappers import FrameStackObservation, ReshapeObservation  # noqa: E402

from a3c_envs import inspect_env, make_env, make_vector_env  # noqa: E402
from a3c_envs.atari import make_atari  # noqa: E402
from tests.envs.test_atari_env import wrapper_types  # noqa: E402

STACKED = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_default_is_one_frame_with_the_same_wrappers_as_before():
    # frame_stack=1 is the chain the code had before stacking existed: no FrameStackObservation anywhere.
    for training in (True, False):
        env = make_atari("ALE/Breakout-v5", training=training)
        try:
            types = wrapper_types(env)
            assert types[0] is ReshapeObservation and FrameStackObservation not in types
            assert env.observation_space == gym.spaces.Box(0, 255, (1, 84, 84), np.uint8)
        finally:
            env.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_stacked_frames_are_the_single_frames_oldest_first():
    # Same seed, same actions: the k=4 observation's newest frame is the k=1 observation, and each step
    # shifts the stack by one (oldest first). A real reset zero-fills the older frames.
    one, four = make_env("ALE/Pong-v5", frame_stack=1), make_env("ALE/Pong-v5", frame_stack=4)
    try:
        assert four.observation_space == STACKED
        assert FrameStackObservation in wrapper_types(four)
        o1, _ = one.reset(seed=3)
        o4, _ = four.reset(seed=3)
        assert o4.shape == (4, 84, 84) and o4.dtype == np.uint8
        np.testing.assert_array_equal(o4[-1], o1[0])
        assert not o4[:2].any() and o4[2].any()  # zeros, then the reset frame, then FIRE's frame
        for action in [2, 3, 0, 2, 2, 3]:
            previous = o4
            o1, *_ = one.step(action)
            o4, *_ = four.step(action)
            np.testing.assert_array_equal(o4[-1], o1[0])
            np.testing.assert_array_equal(o4[:-1], previous[1:])
    finally:
        one.close()
        four.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_inspect_env_reports_the_stacked_space():
    assert inspect_env("ALE/Pong-v5", frame_stack=4).spaces.obs_shape == (4, 84, 84)
    assert inspect_env("ALE/Pong-v5").spaces.obs_shape == (1, 84, 84)


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize("native", [False, True])
def test_vector_envs_stack_frames_on_both_paths(native):
    envs = make_vector_env("ALE/Pong-v5", 2, training=True, frame_stack=4, native=native)
    try:
        assert envs.single_observation_space == STACKED
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        previous = obs.copy()
        obs, *_ = envs.step(np.zeros(2, np.int64))
        np.testing.assert_array_equal(obs[:, :-1], previous[:, 1:])
    finally:
        envs.close()


def first_life_loss(envs: gym.vector.VectorEnv, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Step Breakout randomly until env 0's first lost life; (final obs, next obs) of that step."""
    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        obs, _, terminated, _, info = envs.step(rng.integers(4, size=envs.num_envs))
        if terminated[0]:
            return info["final_obs"][0].copy(), obs[0].copy()
    raise AssertionError("no life lost in 2000 random Breakout steps")


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize("native", [False, True])
def test_a_lost_life_keeps_the_stack(native):
    # Training: a lost life is a soft reset (NOOP, then FIRE, in the same game), so the stack goes on: the
    # next observation is the final one shifted by those two steps, not a zero-filled new stack.
    envs = make_vector_env("ALE/Breakout-v5", 1, training=True, frame_stack=4, native=native)
    try:
        final, following = first_life_loss(envs, seed=0)
        np.testing.assert_array_equal(following[:2], final[2:])
        assert following[:2].any()
    finally:
        envs.close()
