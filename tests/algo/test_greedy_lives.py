"""Greedy play zeroes a recurrent policy's state at a lost life, as training does (where episodic life ends
the learner's episode there), though the evaluation episode is the whole game; other models and envs
without lives are untouched."""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.algo.evaluation import play_greedy
from a3c.algo.networks import ConvActorCritic
from a3c_envs.vector import SerialVectorEnv
from tests.support.extras import require_extra

SHAPE = (1, 36, 36)  # the smallest image the conv net takes
LENGTH = 6  # every fake episode's steps


class LivesEnv(gym.Env):
    """Random images; loses a life on step ``lose_at`` (1-based; None: never), ends after ``LENGTH`` steps.
    ``ale``: its lives as ALE's ``ale.lives()`` (what a serial vector env's sub-env is asked); ``info``: in
    ``info["lives"]`` (what gymnasium's vector envs merge) instead."""

    observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, lose_at: int | None, ale: bool = True, info: bool = False):
        self.lose_at, self.info = lose_at, info
        self.current_lives, self.steps, self.lives_read = 3, 0, 0
        if ale:
            self.ale = self

    def lives(self) -> int:
        self.lives_read += 1
        return self.current_lives

    def _info(self) -> dict[str, Any]:
        return {"lives": self.current_lives} if self.info else {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.current_lives, self.steps = 3, 0
        return self.np_random.integers(1, 256, SHAPE, np.uint8), self._info()

    def step(self, action: Any):
        self.steps += 1
        self.current_lives -= int(self.steps == self.lose_at)
        obs = self.np_random.integers(1, 256, SHAPE, np.uint8)
        return obs, 1.0, self.steps == LENGTH, False, self._info()


def spied_lstm(lstm_size: int = 8) -> tuple[ConvActorCritic, list[tuple[torch.Tensor, torch.Tensor] | None]]:
    """A conv-LSTM whose ``step`` records the state [B, H] each call starts from."""
    torch.manual_seed(0)
    model = ConvActorCritic(SHAPE, 2, lstm_size=lstm_size)
    seen: list[tuple[torch.Tensor, torch.Tensor] | None] = []
    step = model.step

    def spy(obs: torch.Tensor, state: Any) -> Any:
        seen.append(None if state is None else (state[0].clone(), state[1].clone()))
        return step(obs, state)

    model.step = spy
    return model, seen


def zero_rows(state: tuple[torch.Tensor, torch.Tensor]) -> list[int]:
    """The envs whose (h, c) rows are all zero."""
    h, c = state
    zero = (h.abs().sum(1) == 0) & (c.abs().sum(1) == 0)
    return torch.nonzero(zero).flatten().tolist()


def serial(lose_at: list[int | None]) -> gym.vector.VectorEnv:
    return SerialVectorEnv([partial(LivesEnv, k) for k in lose_at])  # as the evaluator's Atari envs


def sync_with_info(lose_at: list[int | None]) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([partial(LivesEnv, k, ale=False, info=True) for k in lose_at])


@pytest.mark.parametrize("make", [serial, sync_with_info])
def test_the_state_is_zeroed_for_exactly_the_envs_that_lost_a_life(make):
    lose_at = [None, 3, 5]
    model, seen = spied_lstm()
    envs = make(lose_at)
    try:
        returns, lengths = play_greedy(model, envs, seed=0)
    finally:
        envs.close()
    np.testing.assert_array_equal(lengths, [LENGTH] * 3)  # a lost life does not end the evaluation episode
    np.testing.assert_array_equal(returns, [LENGTH] * 3)
    assert len(seen) == LENGTH
    assert zero_rows(seen[0]) == [0, 1, 2]  # every episode starts from a zero state
    for call in range(1, LENGTH):  # call k acts on the observation after step k
        assert zero_rows(seen[call]) == [i for i, k in enumerate(lose_at) if k == call], call


def test_feed_forward_models_do_not_look_at_lives():
    torch.manual_seed(0)
    envs = serial([2, 3])
    try:
        _, lengths = play_greedy(ConvActorCritic(SHAPE, 2, lstm_size=0), envs, seed=0)
        assert [env.lives_read for env in envs.envs] == [0, 0]
    finally:
        envs.close()
    np.testing.assert_array_equal(lengths, [LENGTH] * 2)


@pytest.mark.slow  # ~3 s each: emulates Breakout
@pytest.mark.parametrize("native", [False, True])
def test_breakout_greedy_play_zeroes_the_state_after_each_lost_life(native):
    # The evaluator's real envs: five lives, FIRE after a lost life, whole games. An untrained policy loses
    # lives quickly (sticky actions make the two envs lose some at different steps); the lives are read
    # here independently of play_greedy, before each policy call.
    require_extra("ale_py", "atari")
    from a3c_envs import make_eval_vector_env

    torch.manual_seed(1)  # a net whose games lose lives at different steps on both paths
    model = ConvActorCritic((1, 84, 84), 4, lstm_size=8)
    envs = make_eval_vector_env("ALE/Breakout-v5", 2, native=native)
    lives: list[list[int]] = []
    zeroed: list[list[int]] = []
    rows: list[int] = []
    step = model.step

    def spy(obs: torch.Tensor, state: Any) -> Any:
        if native:
            lives.append([int(x) for x in envs._lives])
        else:
            lives.append([int(env.unwrapped.ale.lives()) for env in envs.envs])
        zeroed.append(zero_rows(state))
        rows.append(obs.shape[0])
        return step(obs, state)

    model.step = spy
    try:
        _, lengths = play_greedy(model, envs, seed=0, max_steps=300)
    finally:
        envs.close()
    # A game that ends is stepped no more: call t acts for the games longer than t steps, in order, and the
    # policy's rows are theirs.
    running = [[i for i in range(2) if t < lengths[i]] for t in range(len(zeroed))]
    assert [len(envs) for envs in running] == rows
    lost = [
        [row for row, i in enumerate(running[t]) if lives[t][i] < lives[t - 1][i]]
        for t in range(1, len(zeroed))
    ]
    assert [0] in lost[: rows.count(2)], lives  # the check below saw one env lose a life and not the other
    assert zeroed[0] == [0, 1] and zeroed[1:] == lost
