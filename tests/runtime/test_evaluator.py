"""The evaluator's choice of best.pt: like with like, every evaluation over the same episodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import a3c.runtime.evaluator as evaluator_module
from a3c.algo.learner import build_shared
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c.rundir.checkpoints import load_checkpoint, saved_best
from a3c.runtime.counters import Counters, Heartbeats, StopSignal
from a3c.runtime.evaluator import Evaluator
from a3c.runtime.run_clock import RunClock
from a3c.runtime.state import SharedState


def cartpole_state(
    run_dir: Path, target: float | None, mark: float | None = None, confirm: int = 100, seed: int = 0
) -> SharedState:
    """A CartPole run's shared state (10 evaluation episodes, ``confirm`` to confirm), best.pt under
    ``run_dir``; ``mark`` fills the model's first parameter, to tell which evaluation's weights best.pt
    holds."""
    config = Config(
        env_id="CartPole-v1", target_return=target, eval_episodes=10, confirm_episodes=confirm, seed=seed
    )
    model, optimizer = build_shared(config, Spaces((4,), 2))
    if mark is not None:
        set_mark(model, mark)
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    return SharedState(
        config,
        Spaces((4,), 2),
        run_dir,
        RunClock.started(),
        model,
        optimizer,
        Counters(1),
        StopSignal(),
        Heartbeats(2),
    )


def set_mark(model: torch.nn.Module, mark: float) -> None:
    with torch.no_grad():
        next(model.parameters()).fill_(mark)


def scripted(
    evaluator: Evaluator, scores: Iterator[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> Evaluator:
    """``evaluator`` whose plays return the next of ``scores`` (each call's first n returns)."""
    monkeypatch.setattr(evaluator, "_play", lambda n, *rest: (next(scores)[:n], np.ones(n)))
    return evaluator


def best_mark(run_dir: Path) -> float:
    """The mark of the weights best.pt holds."""
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    return float(next(iter(best["model_state"].values())).flatten()[0])


def recorded_resets(monkeypatch: pytest.MonkeyPatch, scores: Iterator[float]) -> list[tuple[int, int]]:
    """(episodes, seed) of every vector env the evaluator's plays reset, in order; each play scores the next
    of ``scores`` in every episode."""
    resets: list[tuple[int, int]] = []

    def play_greedy(model, envs, seed, *args):
        resets.append((envs.num_envs, seed))
        return np.full(envs.num_envs, next(scores)), np.ones(envs.num_envs, np.int64)

    monkeypatch.setattr(evaluator_module, "play_greedy", play_greedy)
    return resets


def test_every_evaluation_resets_on_the_same_two_seeds(tmp_path, monkeypatch):
    # No target (confirmation rounds of eval_episodes games): evaluation 1 beats the empty best.pt (20
    # games), 2 does not (10), 3 beats it on its first round (20), 4 reaches nothing (10). Each evaluation
    # round resets on one seed, each confirmation round on another: the same games every time.
    shared = cartpole_state(tmp_path, None, confirm=0)
    resets = recorded_resets(monkeypatch, iter([10.0, 10.0, 5.0, 30.0, 20.0, 1.0]))
    evaluator = Evaluator(shared, seed=0)
    episodes = [evaluator.evaluate().episodes for _ in range(4)]
    evaluator.close()
    assert episodes == [20, 10, 20, 10]
    first, confirm = resets[0][1], resets[1][1]
    assert resets == [(10, first), (10, confirm), (10, first), (10, first), (10, confirm), (10, first)]
    assert first + 10 <= confirm  # the confirmation round plays other episodes


def test_a_restarted_or_resumed_evaluator_plays_the_same_seeds(tmp_path, monkeypatch):
    # Each start of the evaluator is given a seed stream of its own (a restart, a resumed run's evaluator
    # with a fresh shared state): the episodes stay the run's, so a later best.pt is judged on the games the
    # earlier one was. Each evaluation beats the last (both rounds). Another run seed, other games.
    resets = recorded_resets(monkeypatch, iter([10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 10.0, 10.0]))
    for run_seed, stream, run_dir in ((3, 0, "run"), (3, 1, "run"), (3, 7, "run"), (4, 0, "other")):
        (tmp_path / run_dir).mkdir(exist_ok=True)
        evaluator = Evaluator(cartpole_state(tmp_path / run_dir, None, confirm=0, seed=run_seed), stream)
        evaluator.evaluate()
        evaluator.close()
    first, confirm = resets[0][1], resets[1][1]
    assert resets[:6] == [(10, first), (10, confirm)] * 3 and len(resets) == 8
    assert {seed for _, seed in resets[6:]}.isdisjoint({first, confirm})
    assert saved_best(tmp_path / "run" / "checkpoints" / "best.pt") == (30.0, 30.0, 20, False, None)


def test_best_pt_is_replaced_only_by_a_better_mean_over_both_rounds(tmp_path, monkeypatch):
    # No target. Evaluation 1 averages 100 over both rounds. Evaluation 2's first round (120) beats that,
    # its confirmation (60) brings it to 90: best.pt stays. Evaluation 3's 110 and 100 give 105: it takes
    # best.pt. Evaluation 4's first round (104) does not beat 105: no confirmation round, no change.
    shared = cartpole_state(tmp_path, None, confirm=0)
    rounds = iter([np.full(10, v) for v in (100.0, 100.0, 120.0, 60.0, 110.0, 100.0, 104.0)])
    evaluator = scripted(Evaluator(shared, seed=0), rounds, monkeypatch)
    seen = []
    for mark in (1.0, 2.0, 3.0, 4.0):
        set_mark(shared.model, mark)
        record = evaluator.evaluate()
        seen.append(
            (record.episodes, record.mean_return, record.best_mean_return, record.best_selection_mean)
        )
    evaluator.close()
    assert seen == [
        (20, 100.0, 100.0, 100.0),
        (20, 90.0, 100.0, 100.0),
        (20, 105.0, 105.0, 105.0),
        (10, 104.0, 105.0, 105.0),
    ]
    assert best_mark(tmp_path) == 3.0
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert (best["mean_return"], best["selection_mean"], best["selection_episodes"]) == (105.0, 105.0, 20)
    assert saved_best(tmp_path / "checkpoints" / "best.pt") == (
        105.0,
        105.0,
        20,
        False,
        None,
    )  # a restart compares


def test_best_pt_is_chosen_on_the_same_twenty_games_even_after_a_solves_long_confirmation(
    tmp_path, monkeypatch
):
    # Target 200, a solve confirmed on 100. Evaluation 1 (150, below the target) plays the selection round
    # too. Evaluation 2 reaches the target on its evaluation round (230), scores 100 on the selection round
    # and 190 on the confirmation's 100 games, so it is not solved; best.pt judges it on its first 20 games
    # (165), the games evaluation 1 was judged on. Evaluation 3 (170 on both rounds) beats that and takes
    # best.pt, though it is below evaluation 2's mean over all its 120 games (180).
    shared = cartpole_state(tmp_path, 200.0)
    rounds = iter(
        [np.full(10, 150.0)] * 2
        + [np.full(10, 230.0), np.full(10, 100.0), np.full(100, 190.0)]
        + [np.full(10, 170.0)] * 2
    )
    evaluator = scripted(Evaluator(shared, seed=0), rounds, monkeypatch)
    seen = []
    for mark in (1.0, 2.0, 3.0):
        set_mark(shared.model, mark)
        record = evaluator.evaluate()
        seen.append((record.episodes, record.solved, record.best_selection_mean))
    evaluator.close()
    assert seen[0] == (20, False, 150.0) and seen[1] == (120, False, 165.0) and seen[2] == (20, False, 170.0)
    assert best_mark(tmp_path) == 3.0


def test_a_candidate_cut_short_in_its_confirmation_writes_nothing(tmp_path, monkeypatch):
    # Evaluation 1's first round beats the empty best.pt; the stop comes during its confirmation round.
    shared = cartpole_state(tmp_path, None, confirm=0)
    stop = []

    def play(n, *seed_and_stop):
        stop.append(n)  # the second play (the confirmation round) sees the stop
        return np.full(n, 50.0), np.ones(n)

    evaluator = Evaluator(shared, seed=0)
    monkeypatch.setattr(evaluator, "_play", play)
    assert evaluator.evaluate(should_stop=lambda: len(stop) == 2) is None
    evaluator.close()
    assert len(stop) == 2 and not (tmp_path / "checkpoints" / "best.pt").exists()
    assert (tmp_path / "eval.csv").read_text().count("\n") == 1  # the header only


def test_a_solved_evaluation_takes_best_pt_from_one_that_failed_its_confirmation(tmp_path, monkeypatch):
    # Evaluation 1 scores 230 on both rounds (target 200), 180 on its 100 confirmation games: not solved.
    # Evaluation 2 scores 205 on both rounds and 210 on 100 more: solved. Its selection mean is below
    # evaluation 1's, yet it is the run's solution: best.pt must hold it, and a later unsolved evaluation
    # with a higher selection mean (evaluation 3, 240 then 150) must not replace it, nor after a restart.
    shared = cartpole_state(tmp_path, 200.0)
    rounds = iter(
        [np.full(n, v) for n, v in [(10, 230.0), (10, 230.0), (100, 180.0)]]
        + [np.full(n, v) for n, v in [(10, 205.0), (10, 205.0), (100, 210.0)]]
        + [np.full(n, v) for n, v in [(10, 240.0), (10, 240.0), (100, 150.0)] * 2]
    )
    solved = []
    for seed, marks in ((0, (1.0, 2.0, 3.0)), (1, (4.0,))):  # seed 1: a restarted evaluator, best.pt on disk
        evaluator = scripted(Evaluator(shared, seed=seed), rounds, monkeypatch)
        for mark in marks:
            set_mark(shared.model, mark)
            record = evaluator.evaluate()
            solved.append((record.solved, record.best_mean_return))
        evaluator.close()
    failed, passed = (4600.0 + 18000.0) / 120, (4100.0 + 21000.0) / 120  # means over 120 episodes
    assert [flag for flag, _ in solved] == [False, True, False, False]
    assert [mean for _, mean in solved] == pytest.approx([failed, passed, passed, passed])
    assert best_mark(tmp_path) == 2.0


def test_a_saved_solve_counts_only_at_a_target_it_reached(tmp_path, monkeypatch):
    # A best.pt solved at target 180 (its confirmation's 100 games at 185) is a solve for a resumed run
    # whose target is 170, not for one whose target is 190: there an unsolved evaluation with a higher
    # selection mean (188; at 170 its confirmation scores 160) replaces it.
    first = iter([np.full(10, 185.0), np.full(10, 185.0), np.full(100, 185.0)])
    evaluator = scripted(Evaluator(cartpole_state(tmp_path, 180.0, 1.0), seed=0), first, monkeypatch)
    assert evaluator.evaluate().solved
    evaluator.close()
    for target, mark, replaced in ((170.0, 2.0, False), (190.0, 3.0, True)):
        later = iter([np.full(10, 188.0), np.full(10, 188.0), np.full(100, 160.0)])
        state = cartpole_state(tmp_path, target, mark)
        evaluator = scripted(Evaluator(state, seed=1, best_mean=185.0), later, monkeypatch)
        assert evaluator.best_solved != replaced
        evaluator.evaluate()
        evaluator.close()
        assert best_mark(tmp_path) == (mark if replaced else 1.0)


def test_a_best_pt_from_before_solves_were_recorded_counts_as_solved_only_over_the_confirmation(
    tmp_path, monkeypatch
):
    # A run without a target saved best.pt at 190 over 20 episodes (10, confirmed on 10), before best.pt
    # said whether it was solved. Resumed with target 180 (confirmed on 100), those 20 episodes are no
    # solve: a confirmed one (185 on both rounds, 182.8 on 100 more) must replace it, although its selection
    # mean is lower.
    scores = iter([np.full(10, 190.0), np.full(10, 190.0), np.full(10, 185.0), np.full(10, 185.0)])
    scores = iter([*scores, np.full(100, 182.8)])
    for target, confirm, mark in ((None, 0, 1.0), (180.0, 100, 2.0)):
        best_mean = 190.0 if mark == 2.0 else -float("inf")
        state = cartpole_state(tmp_path, target, mark, confirm=confirm)
        evaluator = Evaluator(state, seed=0, best_mean=best_mean)
        record = scripted(evaluator, scores, monkeypatch).evaluate()
        evaluator.close()
        if mark == 1.0:  # as an older a3c wrote it
            path = tmp_path / "checkpoints" / "best.pt"
            old = load_checkpoint(path)
            del old["solved"]
            torch.save(old, path)
    assert record.solved and record.best_mean_return == pytest.approx((3700.0 + 18280.0) / 120)
    assert best_mark(tmp_path) == 2.0
    assert load_checkpoint(tmp_path / "checkpoints" / "best.pt")["episodes"] == 120


def test_evaluations_by_steps_come_at_each_multiple_of_the_interval_whatever_the_clock():
    from a3c.runtime.evaluator import EvalSchedule

    config = Config(env_id="CartPole-v1", eval_interval=1e9, eval_interval_steps=1000)  # by time: never
    schedule = EvalSchedule(config, global_step=0)
    assert [step for step in (0, 999, 1000) if schedule.due(step)] == [1000]
    schedule.done(1040, pause_s=0.0)  # the evaluation ran when the counters read 1040: the next is at 2000
    assert not schedule.due(1999) and schedule.due(2000)
    schedule.done(
        2000, pause_s=1e9
    )  # a costly evaluation: the CPU share holds the next one back, steps or not
    assert not schedule.due(10**9)
    resumed = EvalSchedule(config, global_step=5500)  # a resumed run: the next multiple after its steps
    assert not resumed.due(5999) and resumed.due(6000)
    by_time = EvalSchedule(Config(env_id="CartPole-v1", eval_interval=1e9), global_step=0)
    assert not by_time.due(10**9)  # without a step interval, steps do not matter


def test_an_evaluation_reads_the_shared_weights_and_writes_nothing_shared(tmp_path):
    """The evaluator plays its own copy of the weights: the shared parameters, the optimizer's state and the
    counters are bit for bit what they were, and the copy does not alias the shared memory."""
    shared = cartpole_state(tmp_path, target=500.0)
    evaluator = Evaluator(shared, seed=3)
    set_mark(shared.model, 0.25)  # after the evaluator copied the model: it must pull the shared weights
    before = [p.detach().clone() for p in shared.model.parameters()]
    moments = {k: v.clone() for k, v in shared.optimizer.state_dict()["state"][0].items()}
    assert moments  # created eagerly: there is state to compare
    record = evaluator.evaluate()
    assert (
        record is not None and record.episodes == 20
    )  # 10, confirmed on 10 more: it beats the empty best.pt
    assert all(torch.equal(a, b) for a, b in zip(before, shared.model.parameters(), strict=True))
    assert all(torch.equal(v, shared.optimizer.state_dict()["state"][0][k]) for k, v in moments.items())
    assert shared.counters.total_steps == shared.counters.total_updates == 0
    assert evaluator.flat.data_ptr() != evaluator.shared_flat.data_ptr()
    assert float(evaluator.flat[0]) == 0.25  # it played the shared weights


def test_best_is_recorded_only_once_best_pt_is_on_disk(tmp_path, monkeypatch):
    # Evaluation 1 (100 over both rounds) cannot be saved (a full disk): best.pt does not hold it, so
    # evaluation 2 (90) still beats best.pt and replaces it; the record says why evaluation 1 is missing.
    # The evaluators' loops skip weights that have not moved, but not a best.pt that could not be saved.
    shared = cartpole_state(tmp_path, 500.0)
    scores = iter([np.full(n, v) for v in (100.0, 90.0) for n in (10, 100)])
    evaluator = scripted(Evaluator(shared, seed=0), scores, monkeypatch)
    real_save = evaluator_module.save_checkpoint

    def full_disk(path, payload):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(evaluator_module, "save_checkpoint", full_disk)
    set_mark(shared.model, 1.0)
    first = evaluator.evaluate(only_if_moved=True)
    assert first.best_save_error == "OSError: [Errno 28] No space left on device"
    assert first.best_selection_mean is None and first.best_mean_return is None  # no -inf in summary.json
    assert not (tmp_path / "checkpoints" / "best.pt").exists()
    monkeypatch.setattr(evaluator_module, "save_checkpoint", real_save)
    set_mark(shared.model, 2.0)
    second = evaluator.evaluate(only_if_moved=True)  # at the same global step
    evaluator.close()
    assert (
        second.best_save_error is None and second.best_selection_mean == 90.0 and best_mark(tmp_path) == 2.0
    )


def test_a_failed_best_save_is_a_warning_in_the_summary(tmp_path):
    from a3c.core.records import EvalRecord
    from a3c.training.monitor import RunMonitor

    config = Config(env_id="CartPole-v1")
    monitor = RunMonitor(config, tmp_path, Counters(1), RunClock.started(), show_progress=False, serial=True)
    record = EvalRecord(
        1.0, 100, 10, 50.0, 0.0, 50.0, 50.0, 50.0, 10, 0.1, -1.0, False, None, "OSError: full"
    )
    monitor.handle(record)
    monitor.handle(record._replace(global_step=200))
    warnings = monitor.summary("max_steps", 0)["warnings"]
    assert [w["kind"] for w in warnings] == ["best_not_saved"] and "OSError: full" in warnings[0]["message"]


def test_a_run_ending_unsolved_keeps_the_candidate_best_on_fresh_games(tmp_path, monkeypatch):
    # Three evaluations each take best.pt (selection means 100, 110, 120: marks 1, 2, 3); the budget's final
    # evaluation (mark 4, 90) does not. Rescored on the same fresh games, mark 2 scores best (105 against 95
    # and 98): best.pt holds it, with that fresh mean, and the final record tells it. Marks 1 and 4 are
    # not played again: only the last RESCORED_CANDIDATES best.pt's are kept (two here).
    shared = cartpole_state(tmp_path, 500.0, confirm=100)
    fresh = {1.0: 0.0, 2.0: 105.0, 3.0: 98.0}
    plays = []

    def play(n, seed, should_stop):
        mark = float(next(evaluator.model.parameters()).detach().flatten()[0])
        plays.append((n, seed, mark))
        score = fresh[mark] if len(plays) > 7 else {1.0: 100.0, 2.0: 110.0, 3.0: 120.0, 4.0: 90.0}[mark]
        return np.full(n, score), np.ones(n, np.int64)

    monkeypatch.setattr(evaluator_module, "RESCORED_CANDIDATES", 2)
    evaluator = Evaluator(shared, seed=0)
    monkeypatch.setattr(evaluator, "_play", play)
    for mark in (1.0, 2.0, 3.0):
        set_mark(shared.model, mark)
        evaluator.evaluate()
    set_mark(shared.model, 4.0)
    record = evaluator.final()
    evaluator.close()
    assert [(n, mark) for n, _, mark in plays[7:]] == [(30, 2.0), (30, 3.0)]  # RESCORE_GAMES
    assert plays[7][1] == plays[8][1] and plays[7][1] not in {seed for _, seed, _ in plays[:7]}
    assert best_mark(tmp_path) == 2.0
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert (best["fresh_mean"], best["fresh_episodes"], best["selection_mean"]) == (105.0, 30, 110.0)
    assert (record.mean_return, record.best_mean_return, record.best_selection_mean) == (90.0, 110.0, 110.0)


def test_a_solved_run_is_not_rescored(tmp_path, monkeypatch):
    shared = cartpole_state(tmp_path, 100.0, confirm=100)
    scores = iter(
        [np.full(10, 90.0)] * 2 + [np.full(10, 95.0)] * 2 + [np.full(n, 120.0) for n in (10, 10, 100)]
    )
    evaluator = scripted(Evaluator(shared, seed=0), scores, monkeypatch)
    evaluator.evaluate()
    evaluator.evaluate()
    assert evaluator.final().solved and evaluator.rescore() is None  # no more plays: the iterator is spent
    evaluator.close()


def test_the_evaluators_pause_keeps_its_cpu_share_but_never_outlasts_the_runs_training():
    from a3c.runtime.evaluator import cpu_share_wait, next_wait

    config = Config(env_id="CartPole-v1", workers=2, eval_interval=1.0, eval_cpu_share=0.05)
    assert next_wait(4.0, config, trained_s=100_000.0) == pytest.approx(76.0)  # 4 s of 80: the share
    assert next_wait(40.0, config, trained_s=9.0) == 9.0  # a young run looks again soon
    assert next_wait(0.01, config, trained_s=9.0) == 1.0  # never before eval_interval
    assert cpu_share_wait(40.0, config, trained_s=9.0) == 9.0  # by steps: the same cap
    # After a confirmation (near the target) the share is 4 times as large: 20 %, a pause of 4 × 4 s.
    assert next_wait(4.0, config, trained_s=1000.0, near_target=True) == pytest.approx(16.0)
    everything = Config(env_id="CartPole-v1", eval_interval=1.0, eval_cpu_share=0.5)
    assert next_wait(4.0, everything, near_target=True) == 1.0  # at most all of a core: no pause


def test_a_costly_evaluation_mid_run_is_not_followed_by_a_pause_of_half_the_runs_age():
    from a3c.runtime.evaluator import cpu_share_wait, next_wait

    # Pong at 1,468 s: 10 long games took 50 CPU-s; the 5 % share alone would wait 950 s. The pause that
    # balances the workers' lost CPU (50 s / 2 workers per look) against a solve seen half a pause late,
    # for a target about the run's age away: sqrt(2 × 1468 × 50 / 2) = 270.9 s.
    config = Config(env_id="CartPole-v1", workers=2, eval_interval=30.0, eval_cpu_share=0.05)
    assert next_wait(50.0, config, trained_s=1468.0) == pytest.approx(270.9, abs=0.1)
    assert cpu_share_wait(50.0, config, trained_s=1468.0) == pytest.approx(270.9, abs=0.1)
    more_workers = Config(env_id="CartPole-v1", workers=8, eval_interval=30.0, eval_cpu_share=0.05)
    assert next_wait(50.0, more_workers, trained_s=1468.0) == pytest.approx(135.5, abs=0.1)
    assert next_wait(0.5, config, trained_s=1468.0) == 30.0  # a cheap one still waits eval_interval


def test_the_evaluators_loops_skip_weights_that_have_not_moved_but_a_budgets_final_evaluation_does_not(
    tmp_path, monkeypatch
):
    shared = cartpole_state(tmp_path, 200.0)
    evaluator = scripted(Evaluator(shared, seed=0), iter([np.full(10, 150.0)] * 6), monkeypatch)
    assert evaluator.evaluate(only_if_moved=True).global_step == 0  # the first evaluation: nothing to skip
    assert evaluator.evaluate(only_if_moved=True) is None  # the same step: the same weights, no games
    shared.counters.add(0, 20)
    assert evaluator.evaluate(only_if_moved=True).global_step == 20
    assert evaluator.final().global_step == 20  # a budget's last look is always taken
    assert len((tmp_path / "eval.csv").read_text().splitlines()) == 1 + 3
    evaluator.close()


def test_an_evaluation_that_played_a_confirmation_is_near_the_target(tmp_path, monkeypatch):
    shared = cartpole_state(tmp_path, 200.0, confirm=100)
    scores = iter([np.full(10, 150.0)] * 2 + [np.full(10, 210.0), np.full(10, 210.0), np.full(100, 190.0)])
    evaluator = scripted(Evaluator(shared, seed=0), scores, monkeypatch)
    evaluator.evaluate()
    assert not evaluator.near_target
    assert not evaluator.evaluate().solved and evaluator.near_target
    evaluator.close()


def test_a_rescoring_that_would_outlast_the_grace_is_skipped_with_a_warning(tmp_path, monkeypatch, capsys):
    shared = cartpole_state(tmp_path, 500.0, confirm=100)
    scores = iter([np.full(10, v) for v in (100.0, 100.0, 110.0, 110.0, 90.0)])
    evaluator = scripted(Evaluator(shared, seed=0), scores, monkeypatch)
    for mark in (1.0, 2.0):
        set_mark(shared.model, mark)
        evaluator.evaluate()
    record = evaluator.final(seconds_left=0.0)  # no more plays: the iterator would be spent
    evaluator.close()
    assert record.best_mean_return == 110.0 and "fresh_mean" not in load_checkpoint(
        tmp_path / "checkpoints" / "best.pt"
    )
    assert (
        "warning: best.pt was not rescored on fresh games: 2 candidates would take" in capsys.readouterr().err
    )
