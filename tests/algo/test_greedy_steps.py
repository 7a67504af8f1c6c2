"""Greedy play steps each env only to its own episode's end, and the network acts on the running envs' rows
only; every running game's actions, and so every return and length, are those of stepping all envs to the
longest game's end (``every_env_to_the_end``: greedy play as it was, kept here to compare with)."""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.algo import evaluation
from a3c.algo.distributions import action_dist
from a3c.algo.evaluation import LostLives, play_greedy
from a3c.algo.networks import ActorCritic, ConvActorCritic
from a3c.algo.numpy_mlp import make_policy
from a3c_envs import make_eval_vector_env, make_vector_env
from a3c_envs.vector import SerialVectorEnv
from tests.support.extras import require_extra

SHAPE = (1, 36, 36)  # the smallest image the conv net takes
SHORT, LONG = 3, 50


class SeededLengthEnv(gym.Env):
    """An episode of ``SHORT`` steps when reset with an even seed, else ``LONG``; counts its ``step`` calls.
    Random observations (images with ``image``), a reward that depends on the action, and, with ``lives``,
    an ALE-like ``ale.lives()`` that drops at a third and two thirds of the episode (a recurrent policy's
    state is zeroed there)."""

    action_space = gym.spaces.Discrete(3)

    def __init__(self, image: bool = False, lives: bool = False):
        shape = SHAPE if image else (4,)
        self.observation_space = (
            gym.spaces.Box(0, 255, shape, np.uint8) if image else gym.spaces.Box(-1.0, 1.0, shape, np.float32)
        )
        self.image, self.length, self.t, self.steps, self.current_lives = image, LONG, 0, 0, 3
        if lives:
            self.ale = self

    def lives(self) -> int:
        return self.current_lives

    def _obs(self) -> np.ndarray:
        if self.image:
            return self.np_random.integers(0, 256, SHAPE, np.uint8)
        return self.np_random.uniform(-1.0, 1.0, (4,)).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.length = SHORT if seed % 2 == 0 else LONG
        self.t, self.current_lives = 0, 3
        return self._obs(), {}

    def step(self, action: Any):
        self.steps += 1
        self.t += 1
        self.current_lives -= int(self.t in (self.length // 3, 2 * self.length // 3))
        reward = float(int(action) == self.t % 3) + 0.25 * int(action)
        return self._obs(), reward, self.t == self.length, False, {}


def every_env_to_the_end(
    model: torch.nn.Module, envs: gym.vector.VectorEnv, seed: int, max_steps: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy play as it was before: every env and every row of the network step until the longest game
    ends; a mask keeps the ended games' returns and lengths."""
    obs, reset_info = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs, np.float64)
    lengths = np.zeros(envs.num_envs, np.int64)
    running = np.ones(envs.num_envs, bool)
    policy = make_policy(model, envs.num_envs)
    lost_lives = LostLives.of(envs, reset_info) if getattr(policy, "recurrent", False) else None
    every = np.arange(envs.num_envs)
    dist = action_dist(envs.single_action_space)
    image = len(envs.single_observation_space.shape) == 3
    limit, step = (max_steps if max_steps is not None else float("inf")), 0
    while running.any() and step < limit:
        step += 1
        x = np.asarray(obs) if image else np.asarray(obs, dtype=np.float32)
        obs, rewards, terminated, truncated, info = envs.step(dist.greedy(policy(x)))
        if lost_lives is not None and (lost := lost_lives(info, every)) is not None:
            policy.reset(lost)
        returns += np.where(running, rewards, 0.0)
        lengths += running
        running &= ~(terminated | truncated)
    return returns, lengths


def count_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of every network forward of ``play_greedy`` (its policy wrapped, not the production code)."""
    rows: list[int] = []

    def counting_policy(model: torch.nn.Module, num_envs: int) -> Any:
        policy = make_policy(model, num_envs)

        class Counting:
            recurrent = getattr(policy, "recurrent", False)

            def __call__(self, obs: np.ndarray) -> np.ndarray:
                rows.append(obs.shape[0])
                return policy(obs)

            def __getattr__(self, name: str) -> Any:
                return getattr(policy, name)

        return Counting()

    monkeypatch.setattr(evaluation, "make_policy", counting_policy)
    return rows


def serial(num_envs: int, **kwargs: Any) -> SerialVectorEnv:
    return SerialVectorEnv([partial(SeededLengthEnv, **kwargs)] * num_envs)


def mlp() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(4, 3, hidden_sizes=(8,))


def test_a_short_game_is_stepped_only_its_own_length(monkeypatch):
    rows = count_rows(monkeypatch)
    envs = serial(2)  # env i is seeded 10 + i: env 0's game lasts SHORT steps, env 1's LONG
    try:
        returns, lengths = play_greedy(mlp(), envs, seed=10)
        steps = [env.steps for env in envs.envs]
    finally:
        envs.close()
    assert lengths.tolist() == [SHORT, LONG]
    assert steps == [SHORT, LONG]
    assert rows == [2] * SHORT + [1] * (LONG - SHORT)


def test_a_recurrent_net_acts_on_the_running_games_rows_only():
    torch.manual_seed(0)
    model = ConvActorCritic(SHAPE, 3, lstm_size=8)
    rows: list[tuple[int, int]] = []  # (observations, state rows) of each step of the model
    step = model.step

    def spy(obs: torch.Tensor, state: Any) -> Any:
        rows.append((obs.shape[0], state[0].shape[0]))
        return step(obs, state)

    model.step = spy
    envs = serial(3, image=True, lives=True)  # seeded 11, 12, 13: LONG, SHORT, LONG
    try:
        _, lengths = play_greedy(model, envs, seed=11)
        steps = [env.steps for env in envs.envs]
    finally:
        envs.close()
    assert lengths.tolist() == steps == [LONG, SHORT, LONG]
    assert rows == [(3, 3)] * SHORT + [(2, 2)] * (LONG - SHORT)


def test_envs_that_cannot_step_a_subset_step_all_but_the_network_sees_the_running_rows(monkeypatch):
    rows = count_rows(monkeypatch)
    envs = gym.vector.SyncVectorEnv([SeededLengthEnv] * 2)  # no step_some: every env is stepped
    try:
        returns, lengths = play_greedy(mlp(), envs, seed=10)
    finally:
        envs.close()
    assert lengths.tolist() == [SHORT, LONG]
    assert rows == [2] * SHORT + [1] * (LONG - SHORT)
    reference = serial(2)
    try:
        np.testing.assert_array_equal(returns, every_env_to_the_end(mlp(), reference, seed=10)[0])
    finally:
        reference.close()


def assert_as_every_env_to_the_end(model: torch.nn.Module, make: Any, seed: int, **kwargs: Any) -> None:
    envs, reference = make(), make()
    try:
        returns, lengths = play_greedy(model, envs, seed, **kwargs)
        old_returns, old_lengths = every_env_to_the_end(model, reference, seed, **kwargs)
    finally:
        envs.close()
        reference.close()
    assert len(set(lengths.tolist())) > 1, lengths  # games of unequal lengths: some ended before others
    np.testing.assert_array_equal(lengths, old_lengths)
    np.testing.assert_array_equal(returns, old_returns)


@pytest.mark.parametrize(
    "make",
    [
        partial(make_eval_vector_env, "CartPole-v1", 30),  # CartPole's own numpy vector env: steps all
        partial(make_vector_env, "CartPole-v1", 30),  # SerialVectorEnv: steps the running ones
    ],
    ids=["vector-entry-point", "serial"],
)
def test_cartpole_returns_and_lengths_are_those_of_stepping_every_env_to_the_end(make):
    torch.manual_seed(0)
    model = ActorCritic(4, 2, hidden_sizes=(16,))
    with torch.no_grad():  # a net that balances a while, by actions that depend on each env's observation
        for p in model.parameters():
            p.normal_(0.0, 1.0)
    assert_as_every_env_to_the_end(model, make, seed=3)


def test_a_conv_lstm_with_lost_lives_plays_as_when_every_env_ran_to_the_end():
    torch.manual_seed(0)
    model = ConvActorCritic(SHAPE, 3, lstm_size=8)
    with torch.no_grad():  # an LSTM and a head whose greedy actions depend on each env's state, step by step
        for p in [*model.lstm.parameters(), *model.policy_head.parameters()]:
            p.normal_(0.0, 1.0)
    assert_as_every_env_to_the_end(model, partial(serial, 5, image=True, lives=True), seed=20)
    assert_as_every_env_to_the_end(model, partial(serial, 5, image=True, lives=True), seed=20, max_steps=20)


@pytest.mark.slow  # ~1 s: emulates Pong
def test_the_native_atari_envs_step_only_the_chosen_games_and_restart_none():
    require_extra("ale_py", "atari")
    envs = make_eval_vector_env("ALE/Pong-v5", 2, native=True, max_num_frames_per_episode=60)
    try:
        envs.reset(seed=0)
        assert envs._length.tolist() == [1, 1]  # each game's agent steps: its FIRE after the reset
        ended, steps = False, 0
        while not ended and steps < 20:
            _, _, terminated, truncated, info = envs.step_some(np.array([1]), np.array([0]))
            ended, steps = bool(terminated[0] or truncated[0]), steps + 1
            assert info["lives"].shape == (1,)
        assert ended and steps == 60 // 4 - 1  # ALE's frame limit, less the FIRE step
        assert envs._length.tolist() == [1, 0]  # game 0 never stepped; game 1 ended, no FIRE of a new one
    finally:
        envs.close()
