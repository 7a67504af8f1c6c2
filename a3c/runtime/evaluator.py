"""The evaluator: greedy episodes from a copy of the shared weights, eval.csv, best.pt, the stop at target.

``Evaluator`` does the work; ``evaluator_main`` is the thin process shell around it. The evaluator only
reads the shared weights (invariant 6) and plays on seeds no worker uses: its two rounds the same ones at
every evaluation, each confirmation of a solve fresh ones (``eval_rounds``).
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection

import gymnasium as gym
import numpy as np

from a3c.algo.evaluation import play_greedy
from a3c.algo.learner import pull_weights
from a3c.algo.normalize import RunningMeanStd
from a3c.algo.optim import flat_view, flatten_parameters
from a3c.core.config import Config
from a3c.core.devices import model_device, use_device
from a3c.core.records import EvalRecord
from a3c.rundir.checkpoints import (
    checkpoint_payload,
    on_host,
    save_checkpoint,
    saved_best,
)
from a3c.rundir.csvlog import EVAL_COLUMNS, CsvLog
from a3c.runtime.child import ChildGuard, run_child
from a3c.runtime.counters import StopReason, StopSignal
from a3c.runtime.eval_rounds import (
    NEAR_TARGET_SHARE,
    confirmation_seed,
    play_rounds,
    round_seeds,
    selection_games,
)
from a3c.runtime.state import SharedState
from a3c_envs import make_eval_vector_env
from a3c_envs.episodes import eval_step_limit

RESCORED_CANDIDATES = 3  # the best.pt's a run without a solve rescores at its end
# The fresh games each plays then (an evaluation round's, if more): enough to rank a few candidates, without
# the cost of a confirmation's 100 long episodes after the budget.
RESCORE_GAMES = 30
# After a budget stop the trainer waits this long for the evaluator's final evaluation (and rescoring), or
# this share of the run's time if longer: a long Pong run's 90 rescoring games take minutes.
FINAL_EVAL_GRACE_S = 60.0
FINAL_EVAL_SHARE = 0.1


def final_eval_grace_s(trained_s: float) -> float:
    """Seconds the local trainer gives the evaluator's final evaluation and rescoring after a budget stop, in
    a run that trained ``trained_s`` seconds: ``FINAL_EVAL_GRACE_S``, or ``FINAL_EVAL_SHARE`` of them."""
    return max(FINAL_EVAL_GRACE_S, FINAL_EVAL_SHARE * trained_s)


class Candidates:
    """The last few best.pt's this evaluator saved (their checkpoint payloads, weights copied): the best by
    selection mean, as each replaced the one before."""

    def __init__(self, keep: int):
        self.kept: deque[dict] = deque(maxlen=keep)

    def add(self, payload: dict) -> None:
        """Keep a copy of a best.pt just saved (``payload``); a solved one is never rescored, so not kept."""
        if not payload["solved"]:
            self.kept.append(copy.deepcopy(on_host(payload)))

    def payloads(self) -> list[dict]:
        """The kept payloads, oldest first."""
        return list(self.kept)

    def __len__(self) -> int:
        return len(self.kept)


class Evaluator:
    """Evaluates the shared model on demand and keeps the run's eval.csv and best.pt.

    Args:
        shared: the run's shared state; it reads the config (target_return, eval_episodes, env id), the
            global model (only read), the counters (to stamp each evaluation), the run dir (eval.csv and
            checkpoints/best.pt), the start time, the spaces (saved in best.pt so ``a3c evaluate`` can
            rebuild the model) and the observation statistics (``config.obs_norm``: each evaluation
            normalises with a snapshot of them, which best.pt keeps).
        seed: this evaluator process's seed stream, which changes with each restart and resume. The episodes
            do not come from it: every evaluation of the run plays the same ones in its two rounds, on the
            seeds ``round_seeds`` derives from the run's ``config.seed``, and a confirmation fresh ones
            (``confirmation_seed``).
        best_mean: the best selection mean so far (an evaluation's mean over its ``selection_games``, the same
            games for every evaluation); best.pt is only replaced by a better one: a solved evaluation (its
            confirmation held) before any unsolved one, then the higher selection mean.
    """

    def __init__(self, shared: SharedState, seed: int, best_mean: float = -float("inf")):
        config, shared_model, counters = shared.config, shared.model, shared.counters
        run_dir, start_time, spaces, obs_stats = (
            shared.run_dir,
            shared.start_time,
            shared.spaces,
            shared.obs_stats,
        )
        self.config = config
        self.shared_model = shared_model
        self.model = copy.deepcopy(shared_model)
        self.flat, self.shared_flat = flatten_parameters(self.model), flat_view(shared_model)
        self.counters = counters
        self.run_dir = run_dir
        self.seeds = round_seeds(config.seed)  # (evaluation round, selection round): fixed for the run
        self.start_time = start_time
        self.spaces = spaces
        self.obs_stats = obs_stats
        self.obs_snapshot = None if obs_stats is None else RunningMeanStd(spaces.obs_shape)
        saved = saved_best(run_dir / "checkpoints" / "best.pt")
        # Whether best.pt holds a solve of this run's target (a resumed run may have raised it): as it says;
        # one from before it said was a solve when its mean over all its episodes was at the target over as
        # many episodes as a solve played then (an evaluation round and a confirmation).
        if saved.solved is not None:
            self.best_solved = saved.solved and self._solved(saved.target)
        else:
            self.best_solved = (
                self._solved(saved.mean_return)
                and saved.episodes >= config.eval_episodes + config.confirm_episodes
            )
        # The selection mean best.pt was chosen by; a solved best.pt's own, which an unsolved best told
        # before it was replaced may exceed. (A best.pt from before the fixed seeds was chosen by the mean of
        # one evaluation round on seeds of its own: kept, and compared as it is.)
        self.best_mean = saved.selection_mean if self.best_solved else max(best_mean, saved.selection_mean)
        self.best_return = saved.mean_return  # that evaluation's mean_return (eval.csv's value)
        self.confirmations = 0  # confirmations (and rescorings) played: each draws fresh seeds
        self.near_target = False  # the last evaluation played a confirmation (``EvalSchedule``'s share)
        self.evaluated_step: int | None = None  # the global step of the last evaluation with nothing unsaved
        self.candidates = Candidates(RESCORED_CANDIDATES)
        self.log = CsvLog(run_dir / "eval.csv", EVAL_COLUMNS)
        # One vector env per episode count (the rounds, a confirmation, a rescoring), built once, reset on
        # each play's seed.
        self.envs: dict[int, gym.vector.VectorEnv] = {}
        self.cpu_start = time.process_time()  # so start-up imports do not count as evaluation cost

    def evaluate(
        self, should_stop: Callable[[], bool] = lambda: False, only_if_moved: bool = False
    ) -> EvalRecord | None:
        """One evaluation of the current shared weights; None when ``should_stop`` cut it short, or with
        ``only_if_moved`` when the global step is the last evaluation's and its best.pt, if any, was saved
        (about the same weights: their rounds would replay the same games, and a confirmation would be one
        more look at the same policy).

        It plays the evaluation round (``eval_episodes`` games), then the selection round when
        ``plays_selection`` says so (at the target, or beating best.pt), then at the target the confirmation
        (``confirm_episodes`` games on fresh seeds). Its mean over every game it played is eval.csv's
        ``mean_return``; its mean over the ``selection_games`` decides whether it replaces best.pt; the
        confirmation's games alone say whether it is solved (``eval_rounds.holds``)."""
        global_step, updates = self._pull()
        if only_if_moved and global_step == self.evaluated_step:
            return None
        outcome = play_rounds(
            lambda games, seed: self._play(games, seed, should_stop),
            self.config,
            (self.best_solved, self.best_mean),
            self.seeds,
            lambda: self._fresh_seed(global_step),
            should_stop,
        )
        if outcome is None:
            return None
        returns, lengths, solved, selection, self.near_target = outcome
        wall_time = self.start_time.elapsed()
        mean = float(returns.mean())
        row = (
            round(wall_time, 3),
            global_step,
            updates,
            mean,
            float(returns.std()),
            float(returns.min()),
            float(returns.max()),
            float(lengths.mean()),
            len(returns),
        )
        self.log.write(row)
        # A solved evaluation takes best.pt from any unsolved one (LunarLander: best.pt at 188.4 over 110
        # episodes in a run solved at 211.5); among either, the higher mean over the selection games. One
        # that played no selection round did not beat best.pt's mean (it cannot take it), unless it is a
        # solve with confirmation turned off.
        save_error = None
        if (solved, selection) > (self.best_solved, self.best_mean):
            payload = checkpoint_payload(
                self.config,
                self.spaces,
                model_state=self.model.state_dict(),
                **self._obs_norm_state(),
                global_step=global_step,
                updates=updates,
                wall_time=wall_time,
                mean_return=mean,
                selection_mean=selection,
                selection_episodes=min(len(returns), selection_games(self.config)),
                episodes=len(returns),
                solved=solved,
            )
            try:
                save_checkpoint(self.run_dir / "checkpoints" / "best.pt", payload)
            except OSError as exc:  # a full disk should not end the run; the previous best.pt stays
                save_error = f"{type(exc).__name__}: {exc}"
                print(f"warning: could not save best.pt: {exc}", file=sys.stderr, flush=True)
            else:  # the best is what best.pt holds: recorded once on disk, so a later one can replace it
                self.best_mean, self.best_return, self.best_solved = selection, mean, solved
                self.candidates.add(payload)
        if save_error is None:  # else the same weights are worth another look: best.pt may save then
            self.evaluated_step = global_step
        return self._record(row, solved, save_error)

    def _record(self, row: tuple, solved: bool, save_error: str | None = None) -> EvalRecord:
        """The trainer's record of the evaluation ``row`` (eval.csv's), with best.pt's figures."""
        held = None if self.best_mean == -float("inf") else self.best_mean  # None: best.pt holds nothing yet
        return EvalRecord(
            *row,
            cpu_s=self._cpu_s(),
            best_mean_return=held if self.best_return is None else self.best_return,
            solved=solved,
            best_selection_mean=held,
            best_save_error=save_error,
        )

    def final(
        self, should_stop: Callable[[], bool] = lambda: False, seconds_left: float = float("inf")
    ) -> EvalRecord | None:
        """The evaluation at a budget's end, then (unsolved) the best.pt candidates rescored when that fits
        in ``seconds_left`` (judged by the final evaluation's pace): its record tells the best.pt kept."""
        started = time.monotonic()
        record = self.evaluate(should_stop)
        if record is None or record.solved or len(self.candidates) < 2:
            return record
        spent = time.monotonic() - started
        cost = spent / record.episodes * self._rescore_games() * len(self.candidates)
        if cost > seconds_left - spent:
            print(
                f"warning: best.pt was not rescored on fresh games: {len(self.candidates)} candidates would "
                f"take about {cost:.0f} s of the {max(0.0, seconds_left - spent):.0f} s left",
                file=sys.stderr,
                flush=True,
            )
            return record
        if self.rescore(should_stop) is None:
            return record
        return record._replace(best_mean_return=self.best_return, best_selection_mean=self.best_mean)

    def _rescore_games(self) -> int:
        """Fresh games per candidate: ``RESCORE_GAMES``, or ``eval_episodes`` if more (seeds for at most
        ``MAX_EPISODES``)."""
        return max(RESCORE_GAMES, self.config.eval_episodes)

    def rescore(self, should_stop: Callable[[], bool] = lambda: False) -> float | None:
        """At a run's end without a solve: play the best few best.pt's this evaluator saved
        (``Candidates``) on the same fresh games and keep the one with the highest mean there as best.pt —
        each was the best of many evaluations on the same fixed games, so its selection mean flatters it.
        Returns the kept one's fresh mean (None: nothing to rescore, or cut short or not saved)."""
        if self.best_solved or len(self.candidates) < 2:
            return None
        games = self._rescore_games()
        seed = self._fresh_seed(self.counters.total_steps)
        scored = []
        for payload in self.candidates.payloads():
            self._load(payload)
            returns, _ = self._play(games, seed, should_stop)
            if should_stop():
                return None
            scored.append((float(returns.mean()), payload))
        fresh_mean, payload = max(scored, key=lambda item: item[0])
        payload = {**payload, "fresh_mean": fresh_mean, "fresh_episodes": games}
        try:
            save_checkpoint(self.run_dir / "checkpoints" / "best.pt", payload)
        except OSError as exc:
            print(f"warning: could not save the rescored best.pt: {exc}", file=sys.stderr, flush=True)
            return None
        self.best_mean, self.best_return = payload["selection_mean"], payload["mean_return"]
        return fresh_mean

    def _fresh_seed(self, global_step: int) -> int:
        """A seed no game of this run played yet (``confirmation_seed``)."""
        self.confirmations += 1
        return confirmation_seed(self.config.seed, global_step, self.confirmations - 1)

    def _load(self, payload: dict) -> None:
        """Put a candidate's weights (and observation statistics) where ``_play`` reads them."""
        self.model.load_state_dict(payload["model_state"])
        if self.obs_snapshot is not None:
            self.obs_snapshot.load_state_dict(payload["obs_norm"])

    def _solved(self, value: float | None) -> bool:
        """Whether ``value`` (a mean, or the target a saved solve held at) is at this run's target."""
        target = self.config.target_return
        return target is not None and value is not None and value >= target

    # The three steps a remote evaluator (backends/ray/evaluation.py) does elsewhere: where the weights and
    # their step stamps come from, where the episodes are played, and whose CPU time it was.

    def _pull(self) -> tuple[int, int]:
        """Copy the shared weights into ``self.model``; return the (global_step, updates) they belong to."""
        stamps = self.counters.total_steps, self.counters.total_updates
        pull_weights(self.flat, self.shared_flat)
        if self.obs_stats is not None:
            self.obs_snapshot.copy_from(self.obs_stats.merged())
        return stamps

    def _obs_norm_state(self) -> dict:
        return {} if self.obs_snapshot is None else {"obs_norm": self.obs_snapshot.state_dict()}

    def _normalize(self) -> Callable[[np.ndarray], np.ndarray] | None:
        return None if self.obs_snapshot is None else self.obs_snapshot.normalize

    def _play(
        self, episodes: int, seed: int, should_stop: Callable[[], bool]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``episodes`` greedy episodes of ``self.model`` on envs reset on ``seed``: (returns, lengths)."""
        if episodes not in self.envs:
            config = self.config
            self.envs[episodes] = make_eval_vector_env(
                config.env_id,
                episodes,
                frame_stack=config.frame_stack,
                wrappers=config.wrappers,
                **config.env_kwargs,
            )
        limit = eval_step_limit(self.config.env_id, self.config.eval_max_steps, self.config.env_kwargs)
        return play_greedy(
            self.model, self.envs[episodes], seed, should_stop, self.config.squash, self._normalize(), limit
        )

    def _cpu_s(self) -> float:
        return time.process_time() - self.cpu_start

    def close(self) -> None:
        """Close the evaluation envs and the evaluation log."""
        for envs in self.envs.values():
            envs.close()
        self.log.close()


class EvalSchedule:
    """When the next evaluation is due: every ``eval_interval_steps`` global steps when that is set (a seeded
    serial run then evaluates at the same steps on any machine), else ``eval_interval`` s after the last; in
    both, not before the pause the last evaluation asked for (the evaluator process's CPU share)."""

    def __init__(self, config: Config, global_step: int):
        self.config = config
        self.by_steps = config.eval_interval_steps is not None
        self.done(global_step, pause_s=0.0 if self.by_steps else config.eval_interval)

    def due(self, global_step: int) -> bool:
        """Whether an evaluation is due at ``global_step`` and now."""
        if self.by_steps and global_step < self.next_step:
            return False
        return time.monotonic() >= self.next_time

    def done(self, global_step: int, pause_s: float) -> None:
        """An evaluation ended at ``global_step``: the next one comes at the next multiple of the step
        interval (by steps), and not before ``pause_s`` s from now."""
        every = self.config.eval_interval_steps
        if every is not None:
            self.next_step = (global_step // every + 1) * every
        self.next_time = time.monotonic() + pause_s

    def pause_after(self, eval_cpu_s: float, trained_s: float, near_target: bool = False) -> float:
        """The pause after an evaluation that used ``eval_cpu_s`` of CPU, ``trained_s`` s into the run:
        ``next_wait`` by time; by steps only its CPU-share part, so that a short step interval cannot make
        evaluations take a worker's core. ``near_target``: it played a confirmation (``cpu_share``)."""
        if self.by_steps:
            return cpu_share_wait(eval_cpu_s, self.config, trained_s, near_target)
        return next_wait(eval_cpu_s, self.config, trained_s, near_target)


def cpu_share(config: Config, near_target: bool) -> float:
    """The evaluator's CPU share: ``eval_cpu_share``, ``NEAR_TARGET_SHARE`` times that (at most all of a
    core) after an evaluation that played a confirmation."""
    return min(1.0, config.eval_cpu_share * (NEAR_TARGET_SHARE if near_target else 1.0))


def cpu_share_wait(
    eval_cpu_s: float, config: Config, trained_s: float = float("inf"), near_target: bool = False
) -> float:
    """Seconds to wait after an evaluation that used ``eval_cpu_s`` of CPU so that the evaluator uses at most
    its ``cpu_share`` of a core, with two caps that keep a costly evaluation from hiding a solve.

    Never longer than the run has trained (``trained_s``): an early evaluation of a policy that loops plays
    every game to the step limit (on an env without a time limit, 10,000 steps each), and the share's pause
    after it would hide a target reached soon after for many times the run's age. And never longer than
    sqrt(2 · trained_s · eval_cpu_s / workers): taking the time still to go as about the run's age R, looks
    every T s cost the workers R · c / (workers · T) s of training and see the target T / 2 s late on
    average; that T minimises the sum. It binds when evaluations grow costly mid-run (long games as a
    policy improves), where the share alone would look again only after many minutes.
    """
    if eval_cpu_s <= 0.0:
        return 0.0
    share = cpu_share(config, near_target)
    balanced = math.sqrt(2.0 * max(0.0, trained_s) * eval_cpu_s / max(1, config.workers))
    return min(eval_cpu_s * (1.0 - share) / share, trained_s, balanced)


def next_wait(
    eval_cpu_s: float, config: Config, trained_s: float = float("inf"), near_target: bool = False
) -> float:
    """Seconds to wait after an evaluation that used ``eval_cpu_s`` of CPU, ``trained_s`` s into the run: at
    least ``eval_interval``, and long enough that the evaluator uses at most its share of a core
    (``cpu_share_wait``). Cheap evaluations (a fast env, a policy that fails fast) come often and see a
    solve promptly; costly ones back off instead of taking a worker's core. CPU time, not wall time: on a
    busy machine an evaluation's wall time is mostly waiting."""
    return max(config.eval_interval, cpu_share_wait(eval_cpu_s, config, trained_s, near_target))


def evaluator_main(shared: SharedState, conn: Connection, seed: int, best_mean: float) -> None:
    """Process target: evaluate every ``next_wait`` s once the global step has moved (or best.pt could not be
    saved); stop at the target; once more at a budget end.

    Its heartbeat slot is ``config.workers``; ``best_mean`` is the best so far (a restarted evaluator or a
    resumed run must not replace best.pt with a worse model).
    """
    config, stop = shared.config, shared.stop

    def body(guard: ChildGuard) -> None:
        use_device(model_device(shared.model))
        evaluator = Evaluator(shared, seed, best_mean)
        guard.cleanups.append(evaluator.close)
        cut_short = lambda: guard.should_exit() or stop.is_set()  # noqa: E731
        schedule = EvalSchedule(config, shared.counters.total_steps)
        while not cut_short():
            if not schedule.due(shared.counters.total_steps):
                time.sleep(StopSignal.POLL_S)  # an idle evaluator costs the workers nothing
                continue
            cpu_before = time.process_time()
            record = evaluator.evaluate(cut_short, only_if_moved=True)
            used, trained = time.process_time() - cpu_before, shared.start_time.elapsed()
            pause = schedule.pause_after(used, trained, evaluator.near_target)
            schedule.done(shared.counters.total_steps, pause)
            if record is not None:
                conn.send(record)
                if record.solved:
                    stop.stop(StopReason.SOLVED)
        if stop.reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS) and not guard.should_exit():
            interrupted = lambda: guard.should_exit() or not stop.reason.is_budget  # noqa: E731
            # The trainer's grace counts from its own sight of the stop, a poll before this one: a margin.
            record = evaluator.final(interrupted, final_eval_grace_s(shared.start_time.elapsed()) * 0.8)
            if record is not None:
                conn.send(record)

    run_child(
        "evaluator", shared.heartbeats, config.workers, conn, body, config.hang_timeout, shared.hangup_ignored
    )
