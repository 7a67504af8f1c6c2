"""Test envs for the action and observation spaces beyond Discrete and Box, made by id as
``tests.support.space_envs:<Name>`` so that spawned workers import them too.

CopyBits-v0 and MatchChoices-v0 are one-step bandits repeated 8 times (their registration's TimeLimit):
a policy that reads its observation scores 8, a random one 4 and about 2.3. They learn in seconds.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

EPISODE_STEPS = 8


class CopyBitsEnv(gym.Env):
    """Observation: 4 random bits (MultiBinary, flattened for the model); action: 4 bits (MultiBinary);
    reward: the fraction of the action's bits equal to the observation's."""

    observation_space = gym.spaces.MultiBinary(4)
    action_space = gym.spaces.MultiBinary(4)

    def _observe(self) -> np.ndarray:
        self.bits = self.np_random.integers(0, 2, 4).astype(np.int8)
        return self.bits.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        reward = float(np.mean(np.asarray(action) == self.bits))
        return self._observe(), reward, False, False, {}


class MatchChoicesEnv(gym.Env):
    """Observation: a Dict of a target (MultiDiscrete([3, 4]), one-hot for the model) and two noise values;
    action: MultiDiscrete([3, 4]); reward: the fraction of the action's dimensions equal to the target's."""

    NVEC = (3, 4)
    observation_space = gym.spaces.Dict(
        {"target": gym.spaces.MultiDiscrete(NVEC), "noise": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )
    action_space = gym.spaces.MultiDiscrete(NVEC)

    def _observe(self) -> dict:
        self.target = np.array([self.np_random.integers(n) for n in self.NVEC], np.int64)
        return {"target": self.target.copy(), "noise": self.np_random.uniform(-1, 1, 2).astype(np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        reward = float(np.mean(np.asarray(action) == self.target))
        return self._observe(), reward, False, False, {}


class TextObsEnv(gym.Env):
    """Text observations, which no model here takes: refused up front."""

    observation_space = gym.spaces.Text(5)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "a", {}

    def step(self, action):
        return "a", 0.0, False, False, {}


for name, entry_point in [
    ("CopyBits-v0", CopyBitsEnv),
    ("MatchChoices-v0", MatchChoicesEnv),
    ("TextObs-v0", TextObsEnv),
]:
    gym.register(name, entry_point=entry_point, max_episode_steps=EPISODE_STEPS)
