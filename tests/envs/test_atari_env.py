"""Atari envs: DeepMind preprocessing, FIRE on reset, episodic life and reward clipping (needs ale-py)."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tests.support.extras import require_extra

require_extra("ale_py", "atari")

from gymnasium.wrappers import TransformReward  # noqa: E402

from a3c_envs import atari  # noqa: E402
from a3c_envs.atari import EpisodicLife, FireReset, is_atari, make_atari, register_atari, v5_id  # noqa: E402
from a3c_envs.presets import load_preset  # noqa: E402


def wrapper_types(env: gym.Env) -> list[type]:
    """The types of the wrapper chain, outermost first, down to the unwrapped env."""
    types = []
    while True:
        types.append(type(env))
        if not isinstance(env, gym.Wrapper):
            return types
        env = env.env


def test_is_atari():
    assert is_atari("ALE/Pong-v5")
    assert is_atari("ALE/Breakout-v5")
    assert not is_atari("CartPole-v1")
    assert is_atari("PongNoFrameskip-v4")  # the literature's no-sticky-actions setting
    assert not is_atari("Pong-v4")  # frame skip 4 in the emulator: AtariPreprocessing skips instead
    assert not is_atari("mymod:FooNoFrameskip-v4")  # a user's env


def test_legacy_id_plays_without_sticky_actions_and_takes_the_v5_preset():
    env = make_atari("PongNoFrameskip-v4", training=False, frame_stack=4)
    assert env.observation_space.shape == (4, 84, 84)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    env.close()
    assert load_preset("PongNoFrameskip-v4") == load_preset("ALE/Pong-v5") is not None
    assert v5_id("BreakoutNoFrameskip-v4") == "ALE/Breakout-v5" and v5_id("ALE/Pong-v5") == "ALE/Pong-v5"


def test_register_atari_registers_ale_ids():
    assert register_atari() is True
    assert register_atari() is True  # idempotent
    assert "ALE/Pong-v5" in gym.registry


def test_register_atari_without_ale_py_returns_false(monkeypatch):
    monkeypatch.setattr(atari, "_registered", False)
    monkeypatch.setitem(sys.modules, "ale_py", None)  # makes `import ale_py` raise ModuleNotFoundError
    assert register_atari() is False
    with pytest.raises(ModuleNotFoundError) as excinfo:
        make_atari("ALE/Pong-v5", training=True)
    assert excinfo.value.name == "ale_py"


def test_make_atari_rejects_non_atari_ids_and_frameskip():
    with pytest.raises(ValueError, match="not an Atari id"):
        make_atari("CartPole-v1", training=True)
    with pytest.raises(ValueError, match="frameskip"):
        make_atari("ALE/Pong-v5", training=True, frameskip=4)


def test_v5_spec_has_no_step_limit_but_an_ale_frame_limit():
    spec = gym.spec("ALE/Pong-v5")
    assert spec.max_episode_steps is None
    assert spec.kwargs["max_num_frames_per_episode"] == 108000
    assert spec.kwargs["repeat_action_probability"] == 0.25


@pytest.mark.slow  # thousands of frames
def test_pong_training_env_obs_and_clipped_rewards():
    env = make_atari("ALE/Pong-v5", training=True)
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (1, 84, 84), np.uint8)
        obs, info = env.reset(seed=0)
        env.action_space.seed(0)
        assert obs.shape == (1, 84, 84) and obs.dtype == np.uint8
        assert env.observation_space.contains(obs)
        rewards = set()
        for _ in range(300):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert obs.shape == (1, 84, 84) and obs.dtype == np.uint8
            assert "game_over" in info
            rewards.add(float(reward))
            if terminated or truncated:
                obs, info = env.reset()
        assert rewards <= {-1.0, 0.0, 1.0}
        assert -1.0 in rewards  # random play concedes points in 300 steps: the check is not vacuous
    finally:
        env.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_eval_env_has_raw_rewards_and_no_episodic_life():
    env = make_atari("ALE/Pong-v5", training=False)
    try:
        types = wrapper_types(env)
        assert EpisodicLife not in types and TransformReward not in types
        assert FireReset in types
        obs, info = env.reset(seed=0)
        assert obs.shape == (1, 84, 84) and obs.dtype == np.uint8
        _, reward, _, _, info = env.step(0)
        assert isinstance(reward, float) and "game_over" not in info
    finally:
        env.close()


def first_big_reward(env: gym.Env, max_steps: int) -> float | None:
    """Step randomly (seeded) until a reward with |r| > 1 arrives; None if none within ``max_steps``."""
    env.reset(seed=1)
    env.action_space.seed(1)
    for _ in range(max_steps):
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        if abs(reward) > 1:
            return float(reward)
        if terminated or truncated:
            env.reset()
    return None


@pytest.mark.slow  # thousands of frames
def test_rewards_are_clipped_only_when_training():
    # Space Invaders scores 5..30 per alien: random play shoots one within a few hundred steps.
    env = make_atari("ALE/SpaceInvaders-v5", training=False)
    try:
        assert first_big_reward(env, 1000) is not None
    finally:
        env.close()
    env = make_atari("ALE/SpaceInvaders-v5", training=True)
    try:
        assert first_big_reward(env, 1000) is None
    finally:
        env.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_fire_reset_is_applied_to_fire_games(env_id):
    for training in (True, False):
        env = make_atari(env_id, training=training)
        try:
            assert FireReset in wrapper_types(env)
        finally:
            env.close()


def test_fire_reset_wraps_episodic_life():
    # FIRE must follow the soft reset after a lost life too, so FireReset is the outer one.
    types = wrapper_types(make_atari("ALE/Breakout-v5", training=True))
    assert types.index(FireReset) < types.index(EpisodicLife)


@pytest.mark.slow  # thousands of frames
def test_episodic_life_continues_the_game_after_a_lost_life():
    env = make_atari("ALE/Breakout-v5", training=True)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        ale = env.unwrapped.ale
        assert ale.lives() == 5
        for _ in range(5000):
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            assert not truncated
            if terminated:
                break
        else:
            pytest.fail("no life lost in 5000 random steps")
        assert info["game_over"] is False
        lives = ale.lives()
        assert 0 < lives < 5
        env.reset()
        assert ale.lives() == lives  # the same game goes on
        # A seeded reset always starts a fresh game.
        env.reset(seed=0)
        assert ale.lives() == 5
    finally:
        env.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_ale_frame_limit_truncates_and_the_next_reset_is_real():
    # kwargs reach gym.make: a 400-frame limit truncates after ~100 agent steps (noops and FIRE count too).
    # Pong has no lives and a game lasts until 21 points, far beyond 400 frames.
    env = make_atari("ALE/Pong-v5", training=True, max_num_frames_per_episode=400)
    try:
        env.reset(seed=0)
        steps, truncated = 0, False
        while not truncated and steps < 200:
            _, _, terminated, truncated, info = env.step(0)
            steps += 1
            assert not terminated
        assert truncated and steps <= 100 and info["game_over"] is True
        env.reset()
        assert env.unwrapped.ale.getEpisodeFrameNumber() < 400  # a new game, not a continued one
    finally:
        env.close()


class FakeLivesEnv(gym.Env):
    """A scripted env with ``.ale.lives()``: each step plays the next (lives, terminated, truncated)."""

    observation_space = gym.spaces.Discrete(1000)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, script: list[tuple[int, bool, bool]], start_lives: int = 3):
        self.script = script
        self.start_lives = start_lives
        self.current_lives = start_lives
        self.resets = 0
        self.steps = 0
        self.actions: list[int] = []
        self.ale = self  # EpisodicLife reads env.unwrapped.ale.lives()

    def lives(self) -> int:
        return self.current_lives

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.resets += 1
        self.current_lives = self.start_lives
        return 0, {}

    def step(self, action):
        self.actions.append(int(action))
        self.current_lives, terminated, truncated = self.script[self.steps]
        self.steps += 1
        return self.steps, 0.0, terminated, truncated, {}


def test_episodic_life_script():
    inner = FakeLivesEnv([(3, False, False), (2, False, False), (2, False, False), (0, True, False)])
    env = EpisodicLife(inner)
    env.reset()
    assert inner.resets == 1
    assert env.step(1)[2:4] == (False, False)
    _, _, terminated, _, info = env.step(1)  # life lost
    assert terminated and info["game_over"] is False
    obs, _ = env.reset()  # soft: one NOOP step, no real reset
    assert inner.resets == 1 and inner.actions[-1] == 0 and obs == 3
    _, _, terminated, _, info = env.step(1)  # the real game over (lives drop to 0 with it)
    assert terminated and info["game_over"] is True
    env.reset()
    assert inner.resets == 2


def test_episodic_life_truncation_forces_a_real_reset():
    env = EpisodicLife(inner := FakeLivesEnv([(3, False, True)]))
    env.reset()
    _, _, terminated, truncated, info = env.step(1)
    assert not terminated and truncated and info["game_over"] is True
    env.reset()
    assert inner.resets == 2


def test_episodic_life_game_over_during_soft_reset_resets_for_real():
    env = EpisodicLife(inner := FakeLivesEnv([(2, False, False), (0, True, False)]))
    env.reset()
    assert env.step(1)[2] is True  # life lost
    env.reset()  # the NOOP ends the game: reset for real
    assert inner.resets == 2 and env.lives == 3


def test_fire_reset_fires_and_retries_when_fire_ends_the_episode():
    inner = FakeLivesEnv([(3, True, False), (3, False, False)])
    env = FireReset(inner)
    obs, _ = env.reset(seed=0)
    assert inner.actions == [1, 1] and inner.resets == 2 and obs == 2


@pytest.mark.slow  # thousands of frames
def test_training_episodes_are_real_games_with_raw_scores(monkeypatch):
    # The learner's episodes end at every lost life, with clipped rewards; episodes.csv must log the games.
    # The truth is kept below every wrapper: AtariPreprocessing's raw rewards summed from one real reset to
    # the next. Space Invaders scores 5..30 per alien and has 3 lives, so per-life or clipped sums differ.
    from a3c.algo.rollout import RolloutCollector
    from a3c_envs import make_vector_env

    games_of: list[list[tuple[float, float, int]]] = []  # per env: (raw score, clipped score, length)

    class RawGames(atari.AtariPreprocessing):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.games, self.score, self.clipped, self.steps = [], 0.0, 0.0, 0
            games_of.append(self.games)

        def reset(self, **kwargs):
            if self.steps:  # a real reset ends the game that was running
                self.games.append((self.score, self.clipped, self.steps))
            self.score, self.clipped, self.steps = 0.0, 0.0, 0
            return super().reset(**kwargs)

        def step(self, action):
            result = super().step(action)
            self.score += float(result[1])
            self.clipped += float(np.sign(result[1]))
            self.steps += 1
            return result

    monkeypatch.setattr(atari, "AtariPreprocessing", RawGames)
    envs = make_vector_env("ALE/SpaceInvaders-v5", 2, training=True, native=False)  # the Python path
    try:
        assert envs.reports_episodes and len(games_of) == 2
        collector = RolloutCollector(envs, 50, seed=0)
        rng = np.random.default_rng(0)
        n = envs.single_action_space.n
        logged: list[list[tuple[float, int]]] = [[], []]
        life_ends = 0
        while sum(map(len, logged)) < 2:
            seg, finished = collector.collect(lambda o: rng.normal(size=(len(o), n)).astype(np.float32))
            for game in finished:
                logged[game.env_index].append((game.episode_return, game.length))
            life_ends += int((seg.terminated | seg.truncated).sum())
    finally:
        envs.close()
    for i in range(2):  # every logged episode is a whole game, with its raw score and its full length
        assert logged[i] == [(score, steps) for score, _, steps in games_of[i][: len(logged[i])]], i
    games = [game for per_env in games_of for game in per_env]
    assert life_ends >= 2 * len(games)  # several learner episodes (lives) per game
    assert any(score != clipped for score, clipped, _ in games)  # clipped sums would not have passed


@pytest.mark.slow  # thousands of frames
def test_eval_env_of_a_fire_game_fires_after_a_lost_life():
    env = make_atari("ALE/Breakout-v5", training=False)
    try:
        assert atari.FireOnLifeLoss in wrapper_types(env)
        assert atari.FireOnLifeLoss not in wrapper_types(make_atari("ALE/Breakout-v5", training=True))
        env.reset(seed=0)
        lives, steps = env.unwrapped.ale.lives(), 0
        while env.unwrapped.ale.lives() == lives and steps < 5000:  # NOOP only: the launched ball is lost
            env.step(0)
            steps += 1
        # The ball was relaunched without the agent firing: the next life is lost too, with NOOPs only.
        lives, start = env.unwrapped.ale.lives(), steps
        while env.unwrapped.ale.lives() == lives and steps < start + 5000:
            env.step(0)
            steps += 1
        assert env.unwrapped.ale.lives() < lives, "after a lost life the ball was not relaunched"
    finally:
        env.close()
