"""Random play's statistics on the native Atari vector env and the Python path agree (ale-py's C++ envs
behind ``NativeAtariVectorEnv``, and ``make_atari`` + ``SerialVectorEnv``), sticky actions and no-ops at
reset included: their random streams differ, so the two are compared in distribution over thousands of
steps on each path (about 25 CPU-s). Seeded, not a race against the clock, but as costly as a learning
curve: `make test-learning` runs it. What `make test` checks instead (tests/envs/test_atari_vector.py):
both paths step for step without randomness, and sticky actions reaching the emulator on both."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.support.extras import require_extra

require_extra("ale_py", "atari")

from a3c_envs import make_vector_env  # noqa: E402
from tests.envs.test_atari_vector import play  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.learning]


def life_lengths(envs: gym.vector.VectorEnv, steps: int) -> tuple[list[int], list[float]]:
    """Seeded random play: the learner's episode lengths (lives, in training) and the games' raw scores."""
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    running = np.zeros(envs.num_envs, np.int64)
    lengths, scores = [], []
    for _ in range(steps):
        _, _, terminated, truncated, info = envs.step(
            rng.integers(envs.single_action_space.n, size=envs.num_envs)
        )
        running += 1
        ended = terminated | truncated
        lengths.extend(running[ended])
        running[ended] = 0
        if "episode" in info:
            scores.extend(info["episode"]["r"][info["_episode"]])
    return lengths, scores


def test_random_play_statistics_agree_with_the_python_path():
    # With their own random streams the paths differ step by step, but not in distribution. Pong: the
    # learner's rewards are -1/0/1 (random play concedes a point every ~50 steps, rarely wins one).
    # Breakout: the learner's episodes (one life each, ~38 steps of random play) are as long, and the games
    # score as much (~1.7 points). Both runs are seeded (no flakes); the bounds catch a slip in the
    # semantics (a frame skip of 3 makes lives ~20% longer), not noise.
    stats = {}
    for is_native in (True, False):
        pong = make_vector_env("ALE/Pong-v5", 4, training=True, native=is_native)
        breakout = make_vector_env("ALE/Breakout-v5", 8, training=True, native=is_native)
        try:
            rewards = np.concatenate([np.asarray(x).ravel() for x in play(pong, 0, 400)[2::4]])
            lives, scores = life_lengths(breakout, 600)
        finally:
            pong.close()
            breakout.close()
        assert set(rewards) <= {-1.0, 0.0, 1.0} and -1.0 in rewards
        assert len(lives) >= 100 and len(scores) >= 15
        stats[is_native] = (np.mean(rewards != 0), np.mean(lives), np.median(lives), np.mean(scores))
    ratios = np.array(stats[True]) / np.array(stats[False])
    print(stats, ratios)
    assert 0.6 < ratios[0] < 1.6  # Pong's rate of points
    assert 0.9 < ratios[1] < 1.1 and 0.85 < ratios[2] < 1.15  # Breakout's lives: mean and median length
    assert 0.6 < ratios[3] < 1.6  # Breakout's mean game score
