"""Test-only envs, made by id as ``tests.support.envs:<Name>`` so spawned workers import them too.

(Gymnasium imports the module before the ``:`` and looks the name up in its registry.)
"""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np


class FixedLengthEnv(gym.Env):
    """Never terminates; the TimeLimit of its registration cuts every episode after exactly 10 steps.

    Reward 1 per step, so an episode's return equals its length. ``steps`` counts this instance's steps
    (the faulty envs below key their faults on it).
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), 1.0, False, False, {}


class FaultyEnv(FixedLengthEnv):
    """Raises in the 51st step of one instance: a worker crash injected from inside its env."""

    def step(self, action):
        result = super().step(action)
        if self.steps > 50:
            raise RuntimeError("injected fault: FaultyEnv raised on purpose")
        return result


class NaNRewardEnv(FixedLengthEnv):
    """Every 53rd step of an instance returns a NaN reward: the loss of that segment is not finite."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (float("nan") if self.steps % 53 == 0 else reward), terminated, truncated, info


class HangingEnv(FixedLengthEnv):
    """Blocks forever in its 30th step: a hung worker, which only a missing heartbeat reveals."""

    def step(self, action):
        result = super().step(action)
        if self.steps >= 30:
            threading.Event().wait()  # never set
        return result


class OffsetObsEnv(gym.Env):
    """Observations far from 0 and of very different scales per axis: ``OFFSET + SCALE * z``, z ~ N(0, 1).

    Reward 1 when the action is ``z[0] > 0``: raw observations (or ones clipped after normalising with wrong
    statistics) all look alike, so only a policy fed the properly normalised z plays it well. The
    TimeLimit of its registration cuts every episode after 10 steps, so the best return is 10.
    """

    OFFSET = np.array([1000.0, -500.0, 50.0])
    SCALE = np.array([1.0, 20.0, 0.1])
    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def _observe(self) -> np.ndarray:
        self.z = self.np_random.normal(size=3)
        return (self.OFFSET + self.SCALE * self.z).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        reward = float(int(action) == int(self.z[0] > 0))
        return self._observe(), reward, False, False, {}


class BlindEnv(gym.Env):
    """The same observation at every step and a reward of uniform noise in [0, 1): nothing the agent sees
    predicts its returns, so a feed-forward critic outputs one value for a whole segment and explains none
    of their variance (explained variance 0 up to rounding, on any seed and machine). Episodes of 10 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), float(self.np_random.uniform()), False, False, {}


class AimEnv(gym.Env):
    """A continuous bandit: the observation is a target x in [-0.8, 0.8], the action a in [-1, 1] (Box), the
    reward 1 - |a - x|; a new target at every step. The TimeLimit of its registration cuts every episode
    after 10 steps, so a policy that reads its observation scores close to 10 and a uniform random one about
    4. A Gaussian policy learns it in a few thousand steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _observe(self) -> np.ndarray:
        self.target = self.np_random.uniform(-0.8, 0.8, 1).astype(np.float32)
        return self.target.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        reward = 1.0 - float(abs(np.asarray(action, np.float64)[0] - self.target[0]))
        return self._observe(), reward, False, False, {}


for name, entry_point in [
    ("FixedLength-v0", FixedLengthEnv),
    ("Blind-v0", BlindEnv),
    ("OffsetObs-v0", OffsetObsEnv),
    ("Aim-v0", AimEnv),
    ("Faulty-v0", FaultyEnv),
    ("NaNReward-v0", NaNRewardEnv),
    ("Hanging-v0", HangingEnv),
]:
    gym.register(name, entry_point=entry_point, max_episode_steps=10)
# Blind-v0 without a time limit: its episodes never end by themselves (greedy play must end them).
gym.register("Endless-v0", entry_point=BlindEnv)


def make_fixed_length(length: int = 10) -> gym.Env:
    """An env factory (``tests.support.envs:make_fixed_length``, not a registered id): FixedLengthEnv cut
    after ``length`` steps (an env kwarg)."""
    return gym.wrappers.TimeLimit(FixedLengthEnv(), max_episode_steps=length)


class Doubled(gym.ObservationWrapper):
    """A wrapper (``tests.support.envs:Doubled``): observations times 2, in a Box twice as wide, and
    rewards times 2."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(2 * space.low, 2 * space.high, space.shape, space.dtype)

    def observation(self, observation):
        return 2 * observation

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, 2 * reward, terminated, truncated, info


# Paced's step time: about 5x what the CartPole preset's update computes per env step, so that a worker of a
# paced run uses about a sixth of a core and still steps about 1,600 times a second.
PACE_S = 0.0005


class Paced(gym.Wrapper):
    """A wrapper (``tests.support.envs:Paced``) whose every step takes PACE_S longer, as a slower simulator's
    would. For the runs whose tests wait for events (a restart, a hang found) rather than steps: their
    workers would otherwise train flat out meanwhile, on the cores the other tests share."""

    def step(self, action):
        time.sleep(PACE_S)  # the simulator's time: nothing waits on it
        return self.env.step(action)
