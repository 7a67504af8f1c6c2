"""Observation encodings (Discrete one-hot, Tuple/Dict/MultiDiscrete/MultiBinary flattened, float32) as
gymnasium flattens them, the spaces recorded for them, and one clear line for spaces still unsupported."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, Graph, MultiBinary, MultiDiscrete, Sequence, Text, Tuple

from a3c.core.spaces import Spaces
from a3c_envs import EnvSetupError, inspect_env, make_env, make_eval_vector_env, make_vector_env
from a3c_envs.space_check import check_spaces, observation_encoding, spaces_of

# (env id, encoding, encoded length)
ENCODED = [
    ("FrozenLake-v1", "one_hot", 16),
    ("Blackjack-v1", "flatten", 32 + 11 + 2),
    ("tests.support.space_envs:MatchChoices-v0", "flatten", 2 + 3 + 4),
    ("tests.support.space_envs:CopyBits-v0", "flatten", 4),
]


@pytest.mark.parametrize("env_id, encoding, length", ENCODED)
def test_observations_are_gymnasiums_flattening_as_float32(env_id, encoding, length):
    info = inspect_env(env_id)
    assert info.spaces.obs_shape == (length,) and info.spaces.obs_encoding == encoding
    raw, encoded = make_env(env_id, seed=3, encode=False), make_env(env_id, seed=3)
    try:
        # gymnasium's flattened space, as float32: [0, 1] for one-hot parts, the Box's own bounds for the rest
        # (MatchChoices' noise is in [-1, 1]).
        flat = gym.spaces.flatten_space(raw.observation_space)
        expected = Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)
        assert encoded.observation_space == expected, (encoded.observation_space, expected)
        assert expected.shape == (length,)
        raw_obs, obs = raw.reset(seed=7)[0], encoded.reset(seed=7)[0]
        for _ in range(5):
            assert obs.dtype == np.float32 and obs.shape == (length,)
            np.testing.assert_array_equal(obs, gym.spaces.flatten(raw.observation_space, raw_obs))
            action = raw.action_space.sample()
            raw_obs, *_, raw_end, raw_cut, _ = raw.step(action)
            obs, *_, end, cut, _ = encoded.step(action)
            if raw_end or raw_cut:
                assert end or cut
                break
    finally:
        raw.close()
        encoded.close()


def test_a_discrete_observation_is_its_one_hot():
    env = make_env("FrozenLake-v1", seed=0)
    try:
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs, np.eye(16, dtype=np.float32)[0])  # the start cell, state 0
        obs, *_ = env.step(0)
        assert obs.sum() == 1.0 and obs[env.unwrapped.s] == 1.0
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Blackjack-v1"])
def test_vector_envs_encode_too(env_id):
    length = inspect_env(env_id).spaces.obs_dim
    for envs in (make_vector_env(env_id, 3), make_eval_vector_env(env_id, 3)):
        try:
            obs, _ = envs.reset(seed=0)
            assert obs.shape == (3, length) and obs.dtype == np.float32
            assert envs.single_observation_space.shape == (length,)
        finally:
            envs.close()


def test_encoding_a_dict_of_float32_and_int_parts_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DtypeObservation warned "precision lowered" in every worker
        make_env("tests.support.space_envs:MatchChoices-v0", seed=0).close()


NOT_SUPPORTED_OBS = [
    Text(5),
    Graph(Box(0.0, 1.0, (2,)), None),
    Sequence(Discrete(3)),
    Dict({"image": Box(0, 255, (3, 64, 64), np.uint8), "speed": Box(-1.0, 1.0, (1,))}),
    Tuple((Discrete(2), Box(0.0, 1.0, (2, 2)))),
    Tuple(()),
    Box(0.0, 1.0, (2, 3)),
]
NOT_SUPPORTED_ACTIONS = [
    Tuple((Discrete(2), Discrete(3))),
    Dict({"a": Discrete(2)}),
    MultiDiscrete([[2, 3], [4, 5]]),
    MultiDiscrete([3, 4], start=[1, 0]),
    Discrete(3, start=1),  # the policy's actions are 0..n-1
    MultiBinary([2, 2]),
    Box(-np.inf, np.inf, (2,)),
    Box(-1.0, 1.0, (2, 2)),
    Text(3),
]


@pytest.mark.parametrize("space", NOT_SUPPORTED_OBS, ids=lambda s: type(s).__name__)
def test_unsupported_observations_are_one_line_naming_the_space(space):
    with pytest.raises(EnvSetupError) as excinfo:
        check_spaces("Odd-v0", space, Discrete(2))
    message = str(excinfo.value)
    assert "\n" not in message and "'Odd-v0'" in message and str(space) in message
    assert "not supported yet" in message and "Discrete, MultiDiscrete, MultiBinary" in message


@pytest.mark.parametrize("space", NOT_SUPPORTED_ACTIONS, ids=lambda s: type(s).__name__)
def test_unsupported_actions_are_one_line_naming_the_space(space):
    with pytest.raises(EnvSetupError) as excinfo:
        check_spaces("Odd-v0", Box(0.0, 1.0, (3,)), space)
    message = str(excinfo.value)
    assert "\n" not in message and "action space" in message and " ".join(str(space).split()) in message
    assert "MultiDiscrete or MultiBinary" in message


def test_an_unsupported_env_is_refused_by_inspect_env():
    with pytest.raises(EnvSetupError, match=r"observation space Text\(.*not supported yet"):
        inspect_env("tests.support.space_envs:TextObs-v0")


@pytest.mark.parametrize(
    "space",
    [Dict({"a": Tuple((Discrete(3), MultiBinary(2))), "b": Box(-1.0, 1.0, ())}), MultiDiscrete([2, 5])],
    ids=["nested", "multi-discrete"],
)
def test_nested_and_multi_observations_flatten(space):
    check_spaces("Fine-v0", space, Discrete(2))
    assert observation_encoding(space) == "flatten"
    assert spaces_of(space, Discrete(2)).obs_shape == (gym.spaces.flatdim(space),)


@pytest.mark.parametrize(
    "action_space",
    [Discrete(3), MultiDiscrete([3, 4]), MultiBinary(5), Box(-2.0, 2.0, (2,))],
    ids=lambda s: type(s).__name__,
)
def test_spaces_survive_a_checkpoint_round_trip(action_space):
    spaces = spaces_of(Discrete(6), action_space)
    assert Spaces.from_dict(spaces.to_dict()) == spaces
    assert Spaces.of_checkpoint({"spaces": spaces.to_dict()}) == spaces


def test_spaces_saved_before_the_new_kinds_still_load():
    # The "spaces" of a checkpoint written before MultiDiscrete, MultiBinary and encodings existed.
    old = {"obs_shape": [4], "n_actions": 2, "continuous": False, "action_low": [], "action_high": []}
    assert Spaces.from_dict(old) == inspect_env("CartPole-v1").spaces
    assert Spaces.from_dict(old).action_kind == "discrete"
