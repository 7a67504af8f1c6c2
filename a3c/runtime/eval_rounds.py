"""An evaluation's rounds and the stop rule: the run's fixed seeds for the two rounds best.pt is chosen on,
fresh seeds for each confirmation of a solve, and when a confirmation holds.

Every evaluation of a run plays the same episodes in its evaluation round and in its selection round: each
resets on one seed fixed for the run, so two evaluations' means differ by their policies, not by their
games. best.pt is chosen by the mean over both (``selection_games``): a candidate holds over games it was
not picked on. With a new seed per evaluation, best.pt went to the luckiest of dozens of noisy evaluations
(Pong: 18.8 over 5 games, then 16.9 over 30 fresh ones).

A solve is decided on other games: an evaluation round at the target triggers a confirmation of
``confirm_episodes`` games on seeds no earlier evaluation played, and only those games count. The run is
solved when the one-sided lower confidence bound (``confirm_confidence``) of their mean reaches the target
(``holds``). Pooling the triggering games, confirming on the same seeds at every evaluation and taking the
mean itself let through a policy whose true mean is 0.5 below Pong's target in 61 % of runs of 10
evaluations (scores ~ N(17.5, 1.8)); this rule lets through under 1 % (tests/runtime/test_stop_rule.py).
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from a3c.core.config import MAX_ENVS_PER_WORKER, MAX_EPISODES, Config

# Near the target (the last evaluation played a confirmation) the evaluator may use this many times its
# CPU share: a failed confirmation is the costliest evaluation, and the share's pause after it would keep
# the evaluator from seeing a solve that is likely close.
NEAR_TARGET_SHARE = 4.0
# Above every seed a worker's envs reset on (a child seed is below 2**30; its env i gets that seed + i), and
# below 2**31 - 1 (ALE's seed range) for the last episode of any round.
FIRST_SEED = 2**30 + MAX_ENVS_PER_WORKER
# The evaluation round's seeds lie in the lower half of [FIRST_SEED, 2**31 - 1), the selection round's and
# the confirmations' in the upper half, a confirmation's never within a round's length of the selection's:
# no two rounds share an episode (two confirmations of 100 games share some by one chance in ~2**21).
HALF = (2**31 - 1 - FIRST_SEED) // 2
ROUNDS_KEY = 2**32 - 1  # the seed stream's spawn key: one no child seed uses (theirs are three numbers long)
CONFIRMATIONS_KEY = 1  # under ROUNDS_KEY: the stream of the confirmations' seeds


def round_seeds(run_seed: int) -> tuple[int, int]:
    """(evaluation round's seed, selection round's seed) of the run seeded ``run_seed``: derived from the
    run's seed alone, so a restarted evaluator and a resumed run play the same episodes as the first."""
    state = int(np.random.SeedSequence(run_seed, spawn_key=(ROUNDS_KEY,)).generate_state(1)[0])
    first = FIRST_SEED + state % (HALF - MAX_EPISODES)
    return first, first + HALF


def confirmation_seed(run_seed: int, global_step: int, count: int) -> int:
    """The seed of a confirmation at ``global_step``, the evaluator's ``count``-th: fresh for each (a seeded
    serial run still draws the same ones), in the upper half but never within ``MAX_EPISODES`` of the
    selection round's seed (``clear_of_selection``)."""
    key = (ROUNDS_KEY, CONFIRMATIONS_KEY, global_step, count)
    state = int(np.random.SeedSequence(run_seed, spawn_key=key).generate_state(1)[0])
    return clear_of_selection(state, round_seeds(run_seed)[1])


def clear_of_selection(state: int, selection: int) -> int:
    """A seed of the upper half from the random ``state``, its ``MAX_EPISODES`` games none of the selection
    round's (seeded ``selection``): a draw in [U, U + HALF − 3·MAX_EPISODES) that would overlap them moves
    2·MAX_EPISODES up, past them and still inside the half."""
    seed = FIRST_SEED + HALF + state % (HALF - 3 * MAX_EPISODES)
    return seed if seed + MAX_EPISODES <= selection else seed + 2 * MAX_EPISODES


def selection_games(config: Config) -> int:
    """The games best.pt is chosen by: the evaluation round and the selection round, ``eval_episodes``
    each."""
    return 2 * config.eval_episodes


def at_target(eval_mean: float, config: Config) -> bool:
    """Whether an evaluation round's mean reached the run's target (there is one)."""
    return config.target_return is not None and eval_mean >= config.target_return


def plays_selection(eval_mean: float, config: Config, best_solved: bool, best_mean: float) -> bool:
    """Whether an evaluation whose evaluation round averaged ``eval_mean`` plays the selection round, given
    best.pt's (solved, selection mean): at the target when confirmation is on (``confirm_episodes`` > 0;
    off, the evaluation round at the target is the solve); below it, when it beats an unsolved best.pt,
    whose selection mean is over both rounds too."""
    if at_target(eval_mean, config):
        return config.confirm_episodes > 0
    return not best_solved and eval_mean > best_mean


def t_quantile(confidence: float, dof: int) -> float:
    """Student's t quantile at ``confidence`` for ``dof`` degrees of freedom, from the normal one by its
    Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5): within 0.003 of the exact value from 10 degrees
    of freedom on at 0.95 (1.699 for 29: the derived 30 games)."""
    z = NormalDist().inv_cdf(confidence)
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def lower_bound(returns: np.ndarray, confidence: float) -> float:
    """The one-sided lower confidence bound at ``confidence`` of the mean of the distribution ``returns``
    [n ≥ 2] were drawn from: mean − t·s/√n (Student's t quantile for n − 1 degrees of freedom, the sample's
    standard deviation s); the mean itself at 0.5; -inf for one game (no spread to bound it by)."""
    mean = float(np.mean(returns))
    if confidence <= 0.5:
        return mean
    n = len(returns)
    if n < 2:
        return -float("inf")
    return mean - t_quantile(confidence, n - 1) * float(np.std(returns, ddof=1)) / n**0.5


def holds(returns: np.ndarray, config: Config) -> bool:
    """Whether a confirmation's games ``returns`` [confirm_episodes] confirm a solve: their lower confidence
    bound at ``confirm_confidence`` is at the target."""
    return config.target_return is not None and lower_bound(returns, config.confirm_confidence) >= (
        config.target_return
    )


Play = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


class Outcome(NamedTuple):
    """What one evaluation's rounds played and decided."""

    returns: np.ndarray  # [games]: the evaluation round's, the selection round's, the confirmation's
    lengths: np.ndarray  # [games]
    solved: bool  # the confirmation held (confirmation off: the evaluation round reached the target)
    selection_mean: float  # over the ``selection_games`` (the evaluation round's when it played alone)
    confirmed: bool  # a confirmation was played: the evaluation round reached the target


def play_rounds(
    play: Play,
    config: Config,
    best: tuple[bool, float],
    seeds: tuple[int, int],
    fresh_seed: Callable[[], int],
    should_stop: Callable[[], bool] = lambda: False,
) -> Outcome | None:
    """One evaluation's rounds: the evaluation round; the selection round when ``plays_selection`` says so
    (given best.pt's (solved, selection mean) ``best``); at the target the confirmation, on ``fresh_seed()``.
    ``play(games, seed)`` plays greedy games on envs reset on ``seed``: (returns [games], lengths [games]);
    ``seeds``: the two fixed rounds' (``round_seeds``). None when ``should_stop`` cut it short."""
    eval_seed, selection_seed = seeds
    played = [play(config.eval_episodes, eval_seed)]
    eval_mean = float(played[0][0].mean())
    reached = at_target(eval_mean, config)
    solved, confirmed = reached and config.confirm_episodes == 0, False
    if plays_selection(eval_mean, config, *best) and not should_stop():
        played.append(play(config.eval_episodes, selection_seed))
        if reached and not should_stop():
            confirmation = play(config.confirm_episodes, fresh_seed())
            played.append(confirmation)
            solved, confirmed = holds(confirmation[0], config), True
    if should_stop():
        return None
    returns = np.concatenate([r for r, _ in played])
    lengths = np.concatenate([n for _, n in played])
    return Outcome(returns, lengths, solved, float(returns[: selection_games(config)].mean()), confirmed)
