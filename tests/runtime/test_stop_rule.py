"""The stop rule's error: how often a policy below the target is called solved, with simulated scores."""

from __future__ import annotations

import numpy as np

from a3c.core.config import Config
from a3c.runtime.eval_rounds import play_rounds

RUNS, EVALUATIONS = 400, 10
SPREAD = 1.8  # the standard deviation of a Pong game's score near the target (docs/results.md, "Atari")


def solves(true_mean: float, config: Config, seed: int) -> int:
    """Of ``RUNS`` simulated runs of ``EVALUATIONS`` evaluations each, the number the rule calls solved when
    every game scores ~ N(true_mean, SPREAD) independently; best.pt's selection mean tracked as the
    evaluator does."""
    rng = np.random.default_rng(seed)

    def play(games: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return rng.normal(true_mean, SPREAD, games), np.ones(games, np.int64)

    solved = 0
    for _ in range(RUNS):
        best = (False, -float("inf"))
        for count in range(EVALUATIONS):
            outcome = play_rounds(play, config, best, (1, 2), lambda count=count: 3 + count)
            if outcome.solved:
                solved += 1
                break
            best = (False, max(best[1], outcome.selection_mean))
    return solved


def pong(**values) -> Config:
    """Pong's preset evaluation: 5 games a round, target 18, the derived 30 games to confirm."""
    return Config(env_id="CartPole-v1", target_return=18.0, eval_episodes=5, confirm_episodes=30, **values)


def test_a_policy_half_a_point_below_the_target_is_rarely_called_solved():
    # The old rule (the mean over the triggering round and 10 more, on the same seeds at every evaluation)
    # let 61 % of these runs through; the target is 18, the policy's true mean 17.5.
    assert solves(17.5, pong(), seed=0) <= 0.01 * RUNS  # asked for: at most 5 %


def test_a_policy_half_a_point_above_the_target_is_called_solved():
    # The bound's price: a policy at 18.5 is still found within 10 evaluations in nearly every run.
    assert solves(18.5, pong(), seed=1) >= 0.95 * RUNS
