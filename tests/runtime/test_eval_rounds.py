"""The evaluation's rounds: the run's fixed seeds, fresh seeds for each confirmation, which rounds an
evaluation plays and when a confirmation holds."""

from __future__ import annotations

import numpy as np
import pytest

from a3c.core.config import MAX_ENVS_PER_WORKER, MAX_EPISODES, Config
from a3c.core.errors import BadInput
from a3c.core.seeding import child_seed
from a3c.runtime.eval_rounds import (
    FIRST_SEED,
    HALF,
    clear_of_selection,
    confirmation_seed,
    holds,
    lower_bound,
    play_rounds,
    plays_selection,
    round_seeds,
    selection_games,
    t_quantile,
)


def test_the_rounds_seeds_are_the_runs_and_share_no_episode_with_each_other_or_a_worker():
    for run_seed in (0, 1, 7, 2**32 - 1):
        first, selection = round_seeds(run_seed)
        assert round_seeds(run_seed) == (first, selection)  # seeded, not random
        # Env i of a round gets seed + i: up to MAX_EPISODES envs each, within ALE's seed range.
        assert first + MAX_EPISODES <= selection and selection + MAX_EPISODES <= 2**31 - 1
        # A worker's env i resets on its child seed + i (below 2**30 + MAX_ENVS_PER_WORKER).
        workers = max(
            child_seed(run_seed, slot, restart, resume)
            for slot in range(4)
            for restart in range(3)
            for resume in range(3)
        )
        assert workers + MAX_ENVS_PER_WORKER <= first
    assert len({round_seeds(run_seed) for run_seed in range(100)}) == 100


def test_each_confirmation_plays_fresh_games_apart_from_the_rounds():
    for run_seed in (0, 3, 2**32 - 1):
        first, selection = round_seeds(run_seed)
        seeds = [confirmation_seed(run_seed, step, count) for step in (0, 1000, 10**9) for count in range(50)]
        assert len(set(seeds)) == len(seeds)  # a new seed at each confirmation
        assert seeds == [confirmation_seed(run_seed, s, c) for s in (0, 1000, 10**9) for c in range(50)]
        for seed in seeds:
            assert first + MAX_EPISODES <= seed and seed + MAX_EPISODES <= 2**31 - 1
            assert seed + MAX_EPISODES <= selection or selection + MAX_EPISODES <= seed
    # Draws around the selection round's seed move past its games, never into them, and stay in the half.
    selection = round_seeds(0)[1]
    at_selection = selection - (FIRST_SEED + HALF)  # the draw that would start at the selection's seed
    for state in range(at_selection - MAX_EPISODES - 2, at_selection + MAX_EPISODES + 2):
        seed = clear_of_selection(state, selection)
        assert seed + MAX_EPISODES <= selection or selection + MAX_EPISODES <= seed
    assert clear_of_selection(at_selection - MAX_EPISODES, selection) == selection - MAX_EPISODES  # fits
    last = clear_of_selection(HALF - 3 * MAX_EPISODES - 1, selection)
    assert last + MAX_EPISODES <= 2**31 - 1 and last == FIRST_SEED + 2 * HALF - MAX_EPISODES - 1


def test_the_selection_round_is_played_at_the_target_or_to_beat_an_unsolved_best():
    confirmed = Config(env_id="CartPole-v1", target_return=100.0, confirm_episodes=20)
    unconfirmed = Config(env_id="CartPole-v1", target_return=100.0, confirm_episodes=0)
    no_target = Config(env_id="CartPole-v1")
    never = -float("inf")
    assert plays_selection(100.0, confirmed, best_solved=True, best_mean=150.0)  # a solve is confirmed
    assert not plays_selection(100.0, unconfirmed, best_solved=False, best_mean=never)  # turned off
    assert plays_selection(50.0, no_target, best_solved=False, best_mean=never)  # the first evaluation
    assert plays_selection(50.0, confirmed, best_solved=False, best_mean=49.0)
    assert not plays_selection(49.0, confirmed, best_solved=False, best_mean=49.0)  # a tie does not beat
    assert not plays_selection(99.0, confirmed, best_solved=True, best_mean=49.0)  # below a solved best
    assert selection_games(Config(env_id="CartPole-v1", eval_episodes=7)) == 14


def test_a_confirmation_holds_when_its_lower_confidence_bound_reaches_the_target():
    config = Config(env_id="CartPole-v1", target_return=18.0, confirm_episodes=30, confirm_confidence=0.95)
    spread = np.array([17.0, 19.0] * 15)  # mean 18, s = 1.017
    assert lower_bound(spread, 0.95) == pytest.approx(18.0 - 1.699 * 1.0171 / 30**0.5, abs=1e-3)  # t, 29 dof
    assert lower_bound(spread, 0.5) == 18.0 and lower_bound(np.array([21.0]), 0.95) == -float("inf")
    assert not holds(spread, config)  # the mean at the target is not enough
    assert holds(spread + 0.32, config) and not holds(spread + 0.31, config)
    assert holds(np.full(30, 18.0), config)  # no spread: the mean is the bound
    assert holds(spread, Config(env_id="CartPole-v1", target_return=18.0, confirm_confidence=0.5))
    assert not holds(np.full(30, 1e9), Config(env_id="CartPole-v1"))  # no target, no solve
    with pytest.raises(BadInput, match=r"confirm_confidence: 1\.0 is not allowed.*\[0\.5, 1\)"):
        Config(env_id="CartPole-v1", confirm_confidence=1.0).validate()
    with pytest.raises(BadInput, match=r"confirm_episodes: 1 is not allowed.*at least 2"):
        Config(env_id="CartPole-v1", confirm_episodes=1).validate()
    Config(env_id="CartPole-v1", confirm_episodes=1, confirm_confidence=0.5).validate()  # the mean of one


def test_students_t_quantile_is_close_to_the_tables():
    for dof, table in ((10, 1.812), (19, 1.729), (29, 1.699), (99, 1.660)):
        assert t_quantile(0.95, dof) == pytest.approx(table, abs=0.003)
    assert t_quantile(0.99, 29) == pytest.approx(2.462, abs=0.003)


def scripted_play(scores: dict[int, float], calls: list[tuple[int, int]]):
    """A play whose games all score ``scores[call index]``; records (games, seed) of each call."""

    def play(games: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        calls.append((games, seed))
        return np.full(games, scores[len(calls) - 1]), np.ones(games, np.int64)

    return play


def test_a_solve_is_decided_on_the_confirmations_games_alone():
    # The evaluation round (250) and the selection round (250) are far above the target (200), the
    # confirmation's 100 games (199) just below: not solved, though the mean over all 120 is 207.5.
    config = Config(env_id="CartPole-v1", target_return=200.0, eval_episodes=10, confirm_episodes=100)
    calls: list[tuple[int, int]] = []
    fresh = iter([111, 222])
    play = scripted_play({0: 250.0, 1: 250.0, 2: 199.0, 3: 250.0, 4: 250.0, 5: 200.0}, calls)
    first = play_rounds(play, config, (False, -float("inf")), (5, 7), lambda: next(fresh))
    assert not first.solved and first.returns.mean() == pytest.approx(207.5) and first.selection_mean == 250.0
    second = play_rounds(play, config, (False, 250.0), (5, 7), lambda: next(fresh))
    assert second.solved  # 200 with no spread
    assert calls == [(10, 5), (10, 7), (100, 111), (10, 5), (10, 7), (100, 222)]  # a fresh seed each time


def test_below_the_target_no_confirmation_is_played_and_a_stop_cuts_it_short():
    config = Config(env_id="CartPole-v1", target_return=200.0, eval_episodes=10, confirm_episodes=100)
    calls: list[tuple[int, int]] = []
    play = scripted_play({0: 150.0, 1: 150.0, 2: 150.0}, calls)
    outcome = play_rounds(play, config, (False, 100.0), (5, 7), lambda: 1 / 0)
    assert calls == [(10, 5), (10, 7)] and not outcome.solved and outcome.selection_mean == 150.0
    assert play_rounds(play, config, (False, 100.0), (5, 7), lambda: 1 / 0, should_stop=lambda: True) is None
    off = Config(env_id="CartPole-v1", target_return=100.0, eval_episodes=10, confirm_episodes=0)
    assert play_rounds(scripted_play({0: 100.0}, []), off, (False, 500.0), (5, 7), lambda: 1 / 0).solved
