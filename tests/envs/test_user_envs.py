"""The user's env factories and wrappers in ``make_env`` and the vector envs (``a3c_envs.user_envs``): a
reference tells a factory from a Gymnasium id, the factory gets the env kwargs, the wrappers wrap in order
before a3c's encoding and turn off the fast paths, and each bad object is one line naming it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from a3c.core.user_code import register
from a3c_envs import EnvSetupError, inspect_env, make_env, make_eval_vector_env, make_vector_env
from a3c_envs.user_envs import is_factory, run_name
from a3c_envs.vector import SerialVectorEnv


class Constant(gym.Env):
    """Always observes [1, 2] (Box); episodes of 3 steps."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, scale: float = 1.0):
        self.scale, self.t = scale, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.scale * np.array([1.0, 2.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return self.scale * np.array([1.0, 2.0], np.float32), 1.0, False, self.t >= 3, {}


def plus_one(env: gym.Env) -> gym.Env:
    return gym.wrappers.TransformObservation(env, lambda o: o + 1, env.observation_space)


def times_ten(env: gym.Env) -> gym.Env:
    return gym.wrappers.TransformObservation(env, lambda o: o * 10, env.observation_space)


class AsDiscrete(gym.ObservationWrapper):
    """Observes Discrete(3): 1 always; a3c's encoding (after the wrappers) makes it one-hot."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Discrete(3)

    def observation(self, observation):
        return 1


def test_a_factory_with_kwargs_and_wrappers_in_order_before_the_encoding():
    env_id = register(Constant, "env_id")
    assert is_factory(env_id) and run_name(env_id) == "Constant"
    wrappers = (register(plus_one, "wrappers"), register(times_ten, "wrappers"))
    obs, _ = make_env(env_id, seed=0, wrappers=wrappers, scale=2.0).reset(seed=0)
    np.testing.assert_array_equal(obs, [30.0, 50.0])  # (2 * [1, 2] + 1) * 10: the given order
    obs, _ = make_env(env_id, wrappers=wrappers[::-1]).reset(seed=0)
    np.testing.assert_array_equal(obs, [11.0, 21.0])
    obs, _ = make_env(env_id, wrappers=(register(AsDiscrete, "wrappers"),)).reset(seed=0)
    np.testing.assert_array_equal(obs, [0.0, 1.0, 0.0])  # encoded after the wrapper: one-hot
    info = inspect_env(env_id, wrappers=(register(AsDiscrete, "wrappers"),))
    assert info.env_id == env_id and info.spaces.obs_shape == (3,)


def test_an_importable_factory_by_reference_and_gymnasium_ids_with_a_module():
    env = make_env("tests.support.envs:make_fixed_length", length=4, wrappers=["tests.support.envs:Doubled"])
    assert env.spec is None or env.spec.max_episode_steps is None
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(4)] == [False, False, False, True]  # its kwarg: length 4
    assert env.observation_space.high.tolist() == [2.0, 2.0, 2.0]
    assert not is_factory("tests.support.envs:FixedLength-v0")  # a version: a Gymnasium id
    assert not is_factory("a3c_envs.catch:Catch-v0") and not is_factory("CartPole-v1")
    gym.register("Unversioned", entry_point="tests.support.envs:FixedLengthEnv", max_episode_steps=5)
    try:  # pkg.mod:Name without a version: the registered id, as gymnasium.make made it before
        assert not is_factory("tests.support.envs:Unversioned")
        assert make_env("tests.support.envs:Unversioned").spec.max_episode_steps == 5
    finally:
        del gym.registry["Unversioned"]
    assert is_factory("tests.support.envs:FixedLengthEnv")  # not registered: the class
    assert run_name("tests.support.envs:make_fixed_length") == "make_fixed_length"
    assert run_name("a3c_envs.catch:Catch-v0") == "a3c_envs.catch:Catch-v0"


def test_wrappers_turn_off_the_vector_entry_point_and_the_native_atari_envs():
    doubled = ["tests.support.envs:Doubled"]
    envs = make_eval_vector_env("CartPole-v1", 2, wrappers=doubled)
    assert isinstance(envs, SerialVectorEnv)
    plain = make_env("CartPole-v1")
    obs, _ = envs.reset(seed=3)
    np.testing.assert_allclose(obs[0], 2 * plain.reset(seed=3)[0])
    envs.close()
    with pytest.raises(EnvSetupError, match=r"^native: True is not allowed with wrappers"):
        make_vector_env("ALE/Pong-v5", 1, native=True, wrappers=doubled)


def broken_factory():
    raise ValueError("no such level")


def not_an_env():
    return [1, 2]


def broken_wrapper(env):
    raise RuntimeError("bad wrap")


def unwrapping(env):
    return env.observation_space


@pytest.mark.parametrize(
    ("factory", "wrapper", "message"),
    [
        (broken_factory, None, r"^env_id: factory '.*:broken_factory' raised ValueError: no such level$"),
        (
            not_an_env,
            None,
            r"^env_id: '.*:not_an_env' returned a list, not a gymnasium.Env; expected an env$",
        ),
        (Constant, broken_wrapper, r"^wrappers: '.*:broken_wrapper' raised RuntimeError: bad wrap$"),
        (Constant, unwrapping, r"^wrappers: '.*:unwrapping' returned a Box, not a gymnasium.Env"),
    ],
)
def test_a_bad_factory_or_wrapper_is_one_line_naming_it(factory, wrapper, message):
    wrappers = () if wrapper is None else (register(wrapper, "wrappers"),)
    with pytest.raises(EnvSetupError, match=message) as info:
        make_env(register(factory, "env_id"), wrappers=wrappers)
    assert len(str(info.value).splitlines()) == 1


def test_a_script_object_not_known_here_and_refused_kwargs():
    with pytest.raises(EnvSetupError, match=r"^env_id: '__main__:Gone' was defined in the script"):
        make_env("__main__:Gone")
    with pytest.raises(EnvSetupError, match=r"^env_kwargs: \{'colour': 3\} is not allowed for .*Constant"):
        make_env(register(Constant, "env_id"), colour=3)
