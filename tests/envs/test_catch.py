"""Catch, the suite's env registered by its own module (``a3c_envs.catch:Catch-v0``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from a3c_envs.catch import COLUMNS, ROWS


def play(env: gym.Env, policy, episodes: int) -> float:
    """Mean return of ``policy(obs) -> action`` over ``episodes`` seeded episodes."""
    total = 0.0
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += reward
            done = terminated or truncated
    return total / episodes


def track(obs: np.ndarray) -> int:
    """Move the paddle toward the ball's column."""
    grid = obs.reshape(ROWS, COLUMNS)
    ball, paddle = int(grid[:-1].max(axis=0).argmax()), int(grid[-1].argmax())
    return 1 + int(np.sign(ball - paddle))


def test_catch_is_registered_by_its_module_and_is_a_valid_env():
    env = gym.make("a3c_envs.catch:Catch-v0")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.spec.reward_threshold == 0.9 and env.spec.max_episode_steps == ROWS
    obs, _ = env.reset(seed=0)
    assert obs.shape == (ROWS * COLUMNS,) and obs.sum() == 2  # the ball and the paddle


def test_tracking_the_ball_catches_it_and_a_random_policy_mostly_misses():
    env = gym.make("a3c_envs.catch:Catch-v0")
    assert play(env, track, 100) == 1.0
    env.action_space.seed(0)
    assert -0.75 < play(env, lambda obs: env.action_space.sample(), 1000) < -0.45
