"""An evaluation's two rounds of games: the run's fixed seeds for each, how many games a confirmation round
plays, and when an evaluation plays it.

Every evaluation of a run plays the same episodes: its evaluation round resets on one seed fixed for the run
and its confirmation round on another, so two evaluations' means differ by their policies, not by their
games. best.pt is chosen by the mean over ``selection_games``: a candidate holds over games it was not
picked on. With a new seed per evaluation, best.pt went to the luckiest of dozens of noisy evaluations (Pong:
18.8 over 5 games, then 16.9 over 30 fresh ones).
"""

from __future__ import annotations

import numpy as np

from a3c.core.config import MAX_ENVS_PER_WORKER, MAX_EPISODES, Config

# Above every seed a worker's envs reset on (a child seed is below 2**30; its env i gets that seed + i), and
# below 2**31 - 1 (ALE's seed range) for the last episode of either round.
FIRST_SEED = 2**30 + MAX_ENVS_PER_WORKER
# The evaluation round's seeds lie in the lower half of [FIRST_SEED, 2**31 - 1), the confirmation round's
# in the upper half: the two rounds never share an episode.
HALF = (2**31 - 1 - FIRST_SEED) // 2
ROUNDS_KEY = 2**32 - 1  # the seed stream's spawn key: one no child seed uses (theirs are three numbers long)


def round_seeds(run_seed: int) -> tuple[int, int]:
    """(evaluation round's seed, confirmation round's seed) of the run seeded ``run_seed``: derived from the
    run's seed alone, so a restarted evaluator and a resumed run play the same episodes as the first."""
    state = int(np.random.SeedSequence(run_seed, spawn_key=(ROUNDS_KEY,)).generate_state(1)[0])
    first = FIRST_SEED + state % (HALF - MAX_EPISODES)
    return first, first + HALF


def confirm_round(config: Config, at_target: bool) -> int:
    """Games in a confirmation round: at the target, ``confirm_episodes`` (the solve's confirmation) but at
    least ``eval_episodes``; below it, ``eval_episodes``: enough to judge a candidate for best.pt on twice the
    games that made it one, without the cost of a solve's confirmation at every improvement (HalfCheetah's
    100 × 1000 steps made evaluations 5 times rarer)."""
    return max(config.confirm_episodes, config.eval_episodes) if at_target else config.eval_episodes


def selection_games(config: Config) -> int:
    """The games best.pt is chosen by: the evaluation round and the first ``eval_episodes`` of the
    confirmation round. A confirmation round's game i always resets on the round's seed + i, so these are
    the same games in every confirmed evaluation, whatever its round's length."""
    return 2 * config.eval_episodes


def plays_confirmation(eval_mean: float, config: Config, best_solved: bool, best_mean: float) -> bool:
    """Whether an evaluation whose evaluation round averaged ``eval_mean`` plays the confirmation round, given
    best.pt's (solved, selection mean): at the target, when confirmation is on (``confirm_episodes`` > 0;
    off, the evaluation round at the target is the solve); below it, when it beats an unsolved best.pt, whose
    selection mean is over both rounds too."""
    target = config.target_return
    if target is not None and eval_mean >= target:
        return config.confirm_episodes > 0
    return not best_solved and eval_mean > best_mean
