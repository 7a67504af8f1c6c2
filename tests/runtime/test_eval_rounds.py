"""The evaluation's rounds: the run's fixed seeds, the confirmation round's size and when it is played."""

from __future__ import annotations

from a3c.core.config import MAX_ENVS_PER_WORKER, MAX_EPISODES, Config
from a3c.core.seeding import child_seed
from a3c.runtime.eval_rounds import confirm_round, plays_confirmation, round_seeds, selection_games


def test_the_rounds_seeds_are_the_runs_and_share_no_episode_with_each_other_or_a_worker():
    for run_seed in (0, 1, 7, 2**32 - 1):
        first, confirm = round_seeds(run_seed)
        assert round_seeds(run_seed) == (first, confirm)  # seeded, not random
        # Env i of a round gets seed + i: up to MAX_EPISODES envs each, within ALE's seed range.
        assert first + MAX_EPISODES <= confirm and confirm + MAX_EPISODES <= 2**31 - 1
        # A worker's env i resets on its child seed + i (below 2**30 + MAX_ENVS_PER_WORKER).
        workers = max(
            child_seed(run_seed, slot, restart, resume)
            for slot in range(4)
            for restart in range(3)
            for resume in range(3)
        )
        assert workers + MAX_ENVS_PER_WORKER <= first
    assert len({round_seeds(run_seed) for run_seed in range(100)}) == 100


def test_a_confirmation_round_is_a_solves_at_the_target_and_as_long_as_the_evaluation_below_it():
    config = Config(env_id="CartPole-v1", eval_episodes=5)
    assert confirm_round(config, at_target=False) == 5  # no target: best.pt candidates still confirm
    hundred = Config(env_id="HalfCheetah-v5", eval_episodes=5, confirm_episodes=100)
    assert confirm_round(hundred, at_target=False) == 5  # not 100 long episodes at every improvement
    assert confirm_round(hundred, at_target=True) == 100
    few = Config(env_id="CartPole-v1", eval_episodes=10, confirm_episodes=3)
    assert confirm_round(few, at_target=True) == 10  # never fewer than the selection needs
    assert selection_games(few) == 20


def test_the_confirmation_round_is_played_at_the_target_or_to_beat_an_unsolved_best():
    confirmed = Config(env_id="CartPole-v1", target_return=100.0, confirm_episodes=20)
    unconfirmed = Config(env_id="CartPole-v1", target_return=100.0, confirm_episodes=0)
    no_target = Config(env_id="CartPole-v1")
    never = -float("inf")
    assert plays_confirmation(100.0, confirmed, best_solved=True, best_mean=150.0)  # a solve is confirmed
    assert not plays_confirmation(100.0, unconfirmed, best_solved=False, best_mean=never)  # turned off
    assert plays_confirmation(50.0, no_target, best_solved=False, best_mean=never)  # the first evaluation
    assert plays_confirmation(50.0, confirmed, best_solved=False, best_mean=49.0)
    assert not plays_confirmation(49.0, confirmed, best_solved=False, best_mean=49.0)  # a tie does not beat
    assert not plays_confirmation(99.0, confirmed, best_solved=True, best_mean=49.0)  # below a solved best
