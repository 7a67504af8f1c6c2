"""An evaluation's two rounds of games: the run's fixed seeds for each, how many games a confirmation round
plays, and when an evaluation plays it.

Every evaluation of a run plays the same episodes: its evaluation round resets on one seed fixed for the run
and its confirmation round on another, so two evaluations' means differ by their policies, not by their
games. With a new seed per evaluation, best.pt went to the luckiest of dozens of noisy evaluations (Pong:
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


def confirm_round(config: Config) -> int:
    """Games in a confirmation round: ``confirm_episodes``, or ``eval_episodes`` when that is 0 (no target,
    or confirmation turned off), so that a candidate for best.pt is still judged on more games than the ones
    that made it a candidate."""
    return config.confirm_episodes or config.eval_episodes


def plays_confirmation(eval_mean: float, config: Config, best_solved: bool, best_mean: float) -> bool:
    """Whether an evaluation whose evaluation round averaged ``eval_mean`` plays the confirmation round, given
    best.pt's (solved, selection mean): at the target, when confirmation is on (``confirm_episodes`` > 0;
    off, the evaluation round at the target is the solve); below it, when it beats an unsolved best.pt, whose
    selection mean is over both rounds too."""
    target = config.target_return
    if target is not None and eval_mean >= target:
        return config.confirm_episodes > 0
    return not best_solved and eval_mean > best_mean
