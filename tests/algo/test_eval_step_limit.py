"""Every greedy episode ends: on an env without a time limit, evaluations, ``a3c evaluate`` and
``Policy.evaluate`` stop it after ``eval_max_steps`` (derived: the env's time limit, else 10,000)."""

from __future__ import annotations

import pytest

import a3c
from a3c_envs import episodes
from a3c_envs.episodes import NO_LIMIT_EVAL_STEPS, eval_step_limit
from tests.support.commands import call_a3c
from tests.tools.test_export import random_checkpoint

ENDLESS = "tests.support.envs:Endless-v0"
BOUND = 300  # NO_LIMIT_EVAL_STEPS in the tests that play to it


def test_the_limit_is_the_configs_else_the_envs_time_limit_else_a_bound():
    assert eval_step_limit("CartPole-v1") == 500
    assert eval_step_limit("CartPole-v1", 20) == 20
    import tests.support.envs  # noqa: F401 - registers Endless-v0

    assert eval_step_limit(ENDLESS) == NO_LIMIT_EVAL_STEPS == 10_000
    assert eval_step_limit("tests.support.envs:Blind-v0") == 10  # a module's env: its registered limit
    assert eval_step_limit("CartPole-v1", env_kwargs={"max_episode_steps": 1000}) == 1000  # as the run's envs
    assert eval_step_limit("ALE/Pong-v5") == 27_000  # ALE's own end of a game: 108,000 frames


def test_atari_ids_legacy_ones_too_end_where_ale_ends_a_game():
    # 108,000 emulator frames at our frame skip of 4 (AtariPreprocessing, or the C++ env), not the 10,000
    # steps of an env without a time limit; the run's own frame limit, when it sets one, and 0: ALE's none.
    assert eval_step_limit("PongNoFrameskip-v4") == eval_step_limit("ALE/Pong-v5") == 27_000
    frames = {"max_num_frames_per_episode": 4_002}
    assert eval_step_limit("BreakoutNoFrameskip-v4", env_kwargs=frames) == 1_001
    assert eval_step_limit("ALE/Breakout-v5", env_kwargs=frames) == 1_001
    assert eval_step_limit("ALE/Pong-v5", env_kwargs={"max_num_frames_per_episode": 0}) == NO_LIMIT_EVAL_STEPS
    assert eval_step_limit("PongNoFrameskip-v4", 500) == 500  # the config's eval_max_steps first
    assert eval_step_limit("PongNoFrameskip-v4", env_kwargs={"max_episode_steps": 900}) == 900


@pytest.mark.parametrize(("configured", "length"), [(None, BOUND), (37, 37)])
def test_greedy_episodes_on_an_endless_env_end(tmp_path, monkeypatch, configured, length):
    # The bound lowered from 10,000 (its value is checked above) to BOUND: 10,000 steps an episode took 1 s.
    monkeypatch.setattr(episodes, "NO_LIMIT_EVAL_STEPS", BOUND)
    path = random_checkpoint(tmp_path / "endless.pt", ENDLESS, eval_max_steps=configured)
    assert a3c.load(path).evaluate(episodes=2, seed=0)["mean_length"] == length
    result = call_a3c("evaluate", str(path), "--episodes", "1", "--json")
    assert result.returncode == 0 and f'"mean_length": {float(length)}' in result.stdout, result
