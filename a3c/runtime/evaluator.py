"""The evaluator: greedy episodes from a copy of the shared weights, eval.csv, best.pt, the stop at target.

``Evaluator`` does the work; ``evaluator_main`` is the thin process shell around it. The evaluator only
reads the shared weights (invariant 6) and plays on seeds no worker uses, the same ones at every evaluation
(``eval_rounds``).
"""

from __future__ import annotations

import copy
import sys
import time
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
    save_checkpoint,
    saved_best,
)
from a3c.rundir.csvlog import EVAL_COLUMNS, CsvLog
from a3c.runtime.child import ChildGuard, run_child
from a3c.runtime.counters import StopReason, StopSignal
from a3c.runtime.eval_rounds import confirm_round, plays_confirmation, round_seeds, selection_games
from a3c.runtime.state import SharedState
from a3c_envs import make_eval_vector_env
from a3c_envs.episodes import eval_step_limit


class Evaluator:
    """Evaluates the shared model on demand and keeps the run's eval.csv and best.pt.

    Args:
        shared: the run's shared state; it reads the config (target_return, eval_episodes, env id), the
            global model (only read), the counters (to stamp each evaluation), the run dir (eval.csv and
            checkpoints/best.pt), the start time, the spaces (saved in best.pt so ``a3c evaluate`` can
            rebuild the model) and the observation statistics (``config.obs_norm``: each evaluation
            normalises with a snapshot of them, which best.pt keeps).
        seed: this evaluator process's seed stream, which changes with each restart and resume. The episodes
            do not come from it: every evaluation of the run plays the same ones, on the seeds
            ``round_seeds`` derives from the run's ``config.seed``.
        best_mean: the best selection mean so far (an evaluation's mean over its ``selection_games``, the same
            games for every evaluation); best.pt is only replaced by a better one: a solved evaluation (at the
            target over all its episodes) before any unsolved one, then the higher selection mean.
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
        self.seeds = round_seeds(config.seed)  # (evaluation round, confirmation round): fixed for the run
        self.start_time = start_time
        self.spaces = spaces
        self.obs_stats = obs_stats
        self.obs_snapshot = None if obs_stats is None else RunningMeanStd(spaces.obs_shape)
        saved_selection, saved_mean, saved_episodes = saved_best(run_dir / "checkpoints" / "best.pt")
        # Whether best.pt holds a solved evaluation, judged by this run's target and confirmation (a resumed
        # run may have changed them): its mean at the target over as many episodes as a solve plays now.
        self.best_solved = (
            self._solved(saved_mean) and saved_episodes >= config.eval_episodes + config.confirm_episodes
        )
        # The selection mean best.pt was chosen by; a solved best.pt's own, which an unsolved best told
        # before it was replaced may exceed. (A best.pt from before the fixed seeds was chosen by the mean of
        # one evaluation round on seeds of its own: kept, and compared as it is.)
        self.best_mean = saved_selection if self.best_solved else max(best_mean, saved_selection)
        self.best_return = saved_mean  # that evaluation's mean_return (eval.csv's value)
        self.log = CsvLog(run_dir / "eval.csv", EVAL_COLUMNS)
        # One vector env per episode count (evaluation, confirmation), built once, reset on its round's seed.
        self.envs: dict[int, gym.vector.VectorEnv] = {}
        self.cpu_start = time.process_time()  # so start-up imports do not count as evaluation cost

    def evaluate(self, should_stop: Callable[[], bool] = lambda: False) -> EvalRecord | None:
        """One evaluation of the current shared weights; None when ``should_stop`` cut it short.

        It plays the evaluation round (``eval_episodes`` games), then the confirmation round when
        ``plays_confirmation`` says so: at the target, or beating best.pt. Its mean over every game it played
        is eval.csv's ``mean_return`` and says whether it is solved (≥ the target); its mean over the
        ``selection_games`` decides whether it replaces best.pt."""
        global_step, updates = self._pull()
        eval_seed, confirm_seed = self.seeds
        returns, lengths = self._play(self.config.eval_episodes, eval_seed, should_stop)
        eval_mean, target = float(returns.mean()), self.config.target_return
        if plays_confirmation(eval_mean, self.config, self.best_solved, self.best_mean) and not should_stop():
            # A target reached over 10-20 episodes is luck now and then (CartPole: best.pt at 460-471 over
            # 100 fresh episodes), and so is a best.pt chosen over a few: a candidate must hold over both
            # rounds, the same games as the best.pt it would replace was judged on.
            at_target = target is not None and eval_mean >= target
            games = confirm_round(self.config, at_target)
            more_returns, more_lengths = self._play(games, confirm_seed, should_stop)
            returns = np.concatenate([returns, more_returns])
            lengths = np.concatenate([lengths, more_lengths])
        if should_stop():
            return None
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
        solved = self._solved(mean)
        selection = float(returns[: selection_games(self.config)].mean())
        # A solved evaluation takes best.pt from any unsolved one (LunarLander: best.pt at 188.4 over 110
        # episodes in a run solved at 211.5); among either, the higher mean over the selection games. One
        # that played no confirmation round did not beat best.pt's mean (it cannot take it), unless it is a
        # solve with confirmation turned off.
        save_error = None
        if (solved, selection) > (self.best_solved, self.best_mean):
            try:
                save_checkpoint(
                    self.run_dir / "checkpoints" / "best.pt",
                    checkpoint_payload(
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
                    ),
                )
            except OSError as exc:  # a full disk should not end the run; the previous best.pt stays
                save_error = f"{type(exc).__name__}: {exc}"
                print(f"warning: could not save best.pt: {exc}", file=sys.stderr, flush=True)
            else:  # the best is what best.pt holds: recorded once on disk, so a later one can replace it
                self.best_mean, self.best_return, self.best_solved = selection, mean, solved
        held = None if self.best_mean == -float("inf") else self.best_mean  # None: best.pt holds nothing yet
        return EvalRecord(
            *row,
            cpu_s=self._cpu_s(),
            best_mean_return=held if self.best_return is None else self.best_return,
            solved=solved,
            best_selection_mean=held,
            best_save_error=save_error,
        )

    def _solved(self, mean: float | None) -> bool:
        """Whether an evaluation's mean over all its episodes (confirmation included) is at the target."""
        target = self.config.target_return
        return target is not None and mean is not None and mean >= target

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

    def pause_after(self, eval_cpu_s: float) -> float:
        """The pause after an evaluation that used ``eval_cpu_s`` of CPU: ``next_wait`` by time; by steps only
        its CPU-share part, so that a short step interval cannot make evaluations take a worker's core."""
        if self.by_steps:
            return cpu_share_wait(eval_cpu_s, self.config)
        return next_wait(eval_cpu_s, self.config)


def cpu_share_wait(eval_cpu_s: float, config: Config) -> float:
    """Seconds to wait after an evaluation that used ``eval_cpu_s`` of CPU so that the evaluator uses at most
    ``eval_cpu_share`` of a core."""
    share = config.eval_cpu_share
    return eval_cpu_s * (1.0 - share) / share


def next_wait(eval_cpu_s: float, config: Config) -> float:
    """Seconds to wait after an evaluation that used ``eval_cpu_s`` of CPU: at least ``eval_interval``, and
    long enough that the evaluator uses at most ``eval_cpu_share`` of a core. Cheap evaluations (a fast env,
    a policy that fails fast) come often and see a solve promptly; costly ones back off instead of taking a
    worker's core. CPU time, not wall time: on a busy machine an evaluation's wall time is mostly waiting."""
    return max(config.eval_interval, cpu_share_wait(eval_cpu_s, config))


def evaluator_main(shared: SharedState, conn: Connection, seed: int, best_mean: float) -> None:
    """Process target: evaluate every ``next_wait`` s; stop at the target; once more at a budget end.

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
            record = evaluator.evaluate(cut_short)
            pause = schedule.pause_after(time.process_time() - cpu_before)
            schedule.done(shared.counters.total_steps, pause)
            if record is not None:
                conn.send(record)
                if record.solved:
                    stop.stop(StopReason.SOLVED)
        if stop.reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS) and not guard.should_exit():
            interrupted = lambda: guard.should_exit() or not stop.reason.is_budget  # noqa: E731
            record = evaluator.evaluate(interrupted)
            if record is not None:
                conn.send(record)

    run_child(
        "evaluator", shared.heartbeats, config.workers, conn, body, config.hang_timeout, shared.hangup_ignored
    )
