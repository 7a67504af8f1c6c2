"""``a3c.evaluate_policy``, as Stable-Baselines3's: one env, a vector env under each autoreset mode, or a
callable that makes one; an a3c Policy or any object with ``predict``; observations encoded as ``make_env``
encodes them. Policies built in memory (tests/api/policies.py): no run."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import a3c
from a3c.core.errors import BadInput
from tests.api.policies import discrete_policy, frozen_lake_policy


def cartpole_lengths(seed: int, episodes: int) -> list[int]:
    """The lengths of ``episodes`` CartPole episodes that always push left, the first reset seeded."""
    env, lengths = gym.make("CartPole-v1"), []
    env.reset(seed=seed)
    for _ in range(episodes):
        length, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            length, done = length + 1, terminated or truncated
        lengths.append(length)
        env.reset()
    return lengths


def test_one_env_gives_the_mean_and_std_of_its_episodes():
    expected = cartpole_lengths(seed=5, episodes=4)
    assert len(set(expected)) > 1  # the episodes differ: a seed or a count that is off would show
    policy = discrete_policy(0.9)  # greedy: always action 0
    returns, lengths = a3c.evaluate_policy(
        policy, gym.make("CartPole-v1"), 4, return_episode_rewards=True, seed=5
    )
    assert lengths == expected and returns == [float(n) for n in expected]
    mean, std = a3c.evaluate_policy(policy, gym.make("CartPole-v1"), n_episodes=4, seed=5)
    assert (mean, std) == (float(np.mean(expected)), float(np.std(expected)))


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_vector_env_plays_its_share_in_each_env_under_every_autoreset_mode(mode):
    envs = SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3, autoreset_mode=mode)
    returns, lengths = a3c.evaluate_policy(discrete_policy(0.9), envs, 5, return_episode_rewards=True, seed=5)
    # (5 + i) // 3 episodes in env i: 1, 2, 2; env i's first reset is seeded 5 + i.
    per_env = {i: cartpole_lengths(5 + i, (5 + i) // 3) for i in range(3)}
    assert sorted(lengths) == sorted(n for ns in per_env.values() for n in ns)
    assert returns == [float(n) for n in lengths]
    envs.close()


class Closing(gym.Wrapper):
    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


def test_a_callable_makes_the_env_and_it_is_closed():
    made: list[Closing] = []

    def make() -> gym.Env:
        made.append(Closing(gym.make("CartPole-v1")))
        return made[-1]

    a3c.evaluate_policy(discrete_policy(0.9), make, n_episodes=2)
    assert len(made) == 1 and made[0].closed
    given = Closing(gym.make("CartPole-v1"))
    a3c.evaluate_policy(discrete_policy(0.9), given, n_episodes=1)
    assert not given.closed  # the caller's own env stays open


def test_discrete_observations_are_one_hot_encoded_as_make_env_gives_them():
    policy = frozen_lake_policy()
    returns, lengths = a3c.evaluate_policy(policy, gym.make("FrozenLake-v1"), 3, return_episode_rewards=True)
    assert len(returns) == len(lengths) == 3 and all(1 <= n <= 100 for n in lengths)
    lakes = SyncVectorEnv([lambda: gym.make("FrozenLake-v1")] * 2)  # a batch of Discrete: [2] ints
    returns, lengths = a3c.evaluate_policy(policy, lakes, 3, return_episode_rewards=True)
    assert len(returns) == len(lengths) == 3 and all(1 <= n <= 100 for n in lengths)
    lakes.close()
    with pytest.raises(
        BadInput, match=r"^env: observations Box\(.*\(4,\).* do not fit the policy, which takes "
    ):
        a3c.evaluate_policy(policy, gym.make("CartPole-v1"))


class Sb3Like:
    """SB3's ``predict``: takes state and episode_start, returns (action, state)."""

    def __init__(self):
        self.starts: list[bool] = []

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        self.starts.append(bool(np.asarray(episode_start).reshape(-1)[0]))
        return 0, ("state", len(self.starts))


class PredictOnly:
    def predict(self, obs, deterministic=True):
        return (0, None) if deterministic else 1


def test_any_object_with_predict_is_played():
    sb3 = Sb3Like()
    returns, lengths = a3c.evaluate_policy(
        sb3, gym.make("CartPole-v1"), 2, return_episode_rewards=True, seed=5
    )
    assert lengths == cartpole_lengths(5, 2)
    assert sb3.starts == [True] + [False] * (lengths[0] - 1) + [True] + [False] * (lengths[1] - 1)
    plain = a3c.evaluate_policy(
        PredictOnly(), gym.make("CartPole-v1"), 2, return_episode_rewards=True, seed=5
    )
    assert plain[1] == cartpole_lengths(5, 2)  # its (action, state) tuple read as such


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_episodes": 0}, r"^n_episodes: 0 is not allowed; expected an integer >= 1$"),
        ({"env": 42}, r"^env: int is not allowed; expected a gymnasium.Env, a gymnasium vector env, or a "),
        ({"policy": object()}, r"^policy: object is not allowed; expected an a3c.Policy"),
        ({"seed": -1}, r"^seed: -1 is not allowed"),
    ],
)
def test_bad_arguments_are_one_line(kwargs, message):
    arguments = {"policy": discrete_policy(), "env": gym.make("CartPole-v1"), **kwargs}
    with pytest.raises(BadInput, match=message):
        a3c.evaluate_policy(**arguments)
