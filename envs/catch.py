"""Catch (Mnih et al. 2014; bsuite's ``catch``): a user's kind of env, registered by its own module.

``a3c train --env a3c_envs.catch:Catch-v0`` imports this module, which registers ``Catch-v0`` with gymnasium:
the no-preset suite (``a3c bench --suite``) trains it as it would a user's ``module:EnvId``. A ball falls
from a random column of a 10 × 5 grid, one row per step; the paddle on the bottom row moves left, stays or
moves right. The episode ends when the ball reaches the bottom row: reward +1 if caught, else -1. A
random policy scores about -0.6; the target is 0.9 (a greedy policy that tracks the ball scores 1.0).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ROWS, COLUMNS = 10, 5


class CatchEnv(gym.Env):
    """Observation: the grid, float32 [ROWS * COLUMNS], 1 where the ball or the paddle is. Actions: 3."""

    metadata = {"render_modes": []}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode  # no rendering: gymnasium passes the keyword when one is asked for
        self.observation_space = gym.spaces.Box(0.0, 1.0, (ROWS * COLUMNS,), np.float32)
        self.action_space = gym.spaces.Discrete(3)  # 0 left, 1 stay, 2 right
        self.ball = (0, 0)
        self.paddle = COLUMNS // 2

    def _observe(self) -> np.ndarray:
        grid = np.zeros((ROWS, COLUMNS), np.float32)
        grid[self.ball] = 1.0
        grid[ROWS - 1, self.paddle] = 1.0
        return grid.ravel()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """A ball in a random column of the top row; the paddle in the middle of the bottom row."""
        super().reset(seed=seed)
        self.ball = (0, int(self.np_random.integers(COLUMNS)))
        self.paddle = COLUMNS // 2
        return self._observe(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Move the paddle, drop the ball one row; at the bottom row: +1 if caught, else -1, and the end."""
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, COLUMNS - 1))
        self.ball = (self.ball[0] + 1, self.ball[1])
        landed = self.ball[0] == ROWS - 1
        reward = (1.0 if self.ball[1] == self.paddle else -1.0) if landed else 0.0
        return self._observe(), reward, landed, False, {}


if "Catch-v0" not in gym.registry:  # each worker process imports this module once; a re-import must not warn
    gym.register("Catch-v0", entry_point=CatchEnv, max_episode_steps=ROWS, reward_threshold=0.9)
