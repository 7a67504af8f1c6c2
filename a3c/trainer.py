"""The trainer: run dir, shared state, spawned workers and evaluator, supervision, clean shutdown, summary.

``Trainer.run`` is the whole of ``a3c train`` after the config is resolved. Serial mode runs one Learner and
the Evaluator in this process (no spawn) with the same code and the same files.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from a3c.algo.learner import Learner, build_shared
from a3c.algo.metrics import MetricsWindow
from a3c.algo.normalize import SharedObsStats
from a3c.algo.optim import assert_shared, non_finite_counts
from a3c.core.config import Config
from a3c.core.records import EpisodeRecord, ErrorRecord, EvalRecord, MetricsRecord
from a3c.core.seeding import child_seed
from a3c.progress import Progress
from a3c.run.checkpoints import save_checkpoint
from a3c.run.csvlog import EPISODE_COLUMNS, METRICS_COLUMNS, CsvLog
from a3c.run.resume import restore_model, restore_obs_stats, restore_optimizer, restore_reward_stats, trim_csv
from a3c.run.rundir import create_run_dir, run_metadata, write_json
from a3c.run.tensorboard import TensorBoardLog
from a3c.runtime.context import child_context
from a3c.runtime.evaluator import Evaluator, evaluator_main
from a3c.runtime.shared import Counters, Heartbeats, StopReason, StopSignal
from a3c.runtime.supervisor import ChildSpec, Supervisor
from a3c.runtime.worker import run_learner, worker_main
from envs import EnvInfo

TICK_S = 0.1  # supervision period: how often the trainer looks at children, budgets and signals
FINITE_CHECK_S = 1.0  # how often the shared parameters are checked for NaN/inf
STOP_GRACE_S = 3.0  # children get this long to exit after an interrupt or a failure ...
FINAL_EVAL_GRACE_S = 60.0  # ... and this long when the evaluator still plays its final evaluation
EXIT_CODES = {StopReason.SOLVED: 0, StopReason.MAX_STEPS: 0, StopReason.MAX_SECONDS: 0, StopReason.FAILED: 1}


class RunMonitor:
    """Takes the children's records: writes episodes.csv, tracks evals and errors, shows progress."""

    def __init__(
        self,
        config: Config,
        run_dir: Path,
        counters: Counters,
        start_time: float,
        show_progress: bool,
        serial: bool,
    ):
        self.config = config
        self.serial = serial
        self.counters = counters
        self.start_time = start_time
        self.episodes_log = CsvLog(run_dir / "episodes.csv", EPISODE_COLUMNS)
        self.metrics_log = CsvLog(run_dir / "metrics.csv", METRICS_COLUMNS)
        # On resume, TensorBoard drops the events logged after the checkpoint, as the CSVs do.
        purge = counters.total_steps + 1 if counters.total_steps else None
        self.tensorboard = TensorBoardLog(run_dir, purge) if config.tensorboard else None
        self.lag_by_worker: dict[int, float] = {}
        self.episodes = 0
        self.last_row = (0.0, 0)  # (wall_time, global_step) of the last episodes.csv row
        self.last_eval: EvalRecord | None = None
        self.solved_at: tuple[float, int] | None = None  # (wall_time, global_step) of the first solved eval
        self.best_mean: float | None = None  # mean_return of the evaluation best.pt holds
        self.best_selection: float | None = None  # its first eval_episodes' mean, what best.pt is chosen by
        self.errors: list[ErrorRecord] = []
        self.progress = Progress(config.max_steps, enabled=show_progress)

    def handle(self, record: Any) -> None:
        """Take one message: a list of EpisodeRecord (one update's), an EvalRecord or an ErrorRecord."""
        if self.tensorboard is not None:
            for item in record if isinstance(record, list) else [record]:
                self.tensorboard.write(item)
        if isinstance(record, MetricsRecord):
            self.metrics_log.write(record)
            self.lag_by_worker[record.worker] = record.policy_lag_mean
        elif isinstance(record, list):
            for episode in record:
                # Workers stamp their records concurrently, so one may arrive a few steps "late": keeping
                # the columns non-decreasing (the run-dir contract) costs at most that much precision.
                self.last_row = (
                    max(self.last_row[0], episode.wall_time),
                    max(self.last_row[1], episode.global_step),
                )
                self.episodes += 1
                self.episodes_log.write(
                    episode._replace(wall_time=self.last_row[0], global_step=self.last_row[1])
                )
        elif isinstance(record, EvalRecord):
            self.last_eval = record
            self.best_mean = record.best_mean_return
            self.best_selection = record.best_selection_mean
            if record.solved and self.solved_at is None:
                self.solved_at = (record.wall_time, record.global_step)
        elif isinstance(record, ErrorRecord):
            self.errors.append(record)

    def refresh(self) -> None:
        last = None if self.last_eval is None else self.last_eval.mean_return
        lag = sum(self.lag_by_worker.values()) / len(self.lag_by_worker) if self.lag_by_worker else None
        elapsed = time.time() - self.start_time
        self.progress.update(
            self.counters.total_steps,
            self.episodes,
            last,
            self.best_mean,
            lag,
            elapsed,
            self.config.max_seconds,
        )

    def summary(self, exit_reason: str, restarts: int) -> dict[str, Any]:
        wall_s = time.time() - self.start_time
        total = self.counters.total_steps
        # In serial mode the evaluator shares this process, so its CPU time cannot be told apart.
        cpu_s = None if self.last_eval is None or self.serial else self.last_eval.cpu_s
        return {
            "env_id": self.config.env_id,
            "solved": self.solved_at is not None,
            "target_return": self.config.target_return,
            "start_unix": round(self.start_time, 3),  # the Unix time wall_time and time_to_solve_s count from
            "time_to_solve_s": None if self.solved_at is None else self.solved_at[0],
            "steps_to_solve": None if self.solved_at is None else self.solved_at[1],
            "total_steps": total,
            "wall_s": round(wall_s, 3),
            "steps_per_s": round(total / wall_s, 1) if wall_s > 0 else None,
            "best_mean_return": self.best_mean,
            "exit_reason": exit_reason,
            "total_updates": self.counters.total_updates,
            "episodes": self.episodes,
            "last_mean_return": None if self.last_eval is None else self.last_eval.mean_return,
            "evaluator_cpu_s": None if cpu_s is None else round(cpu_s, 3),
            "evaluator_cpu_fraction": None if cpu_s is None else round(cpu_s / wall_s, 4),
            "restarts": restarts,
            "skipped_updates": self.counters.total_skipped,
            "best_selection_mean": self.best_selection,
        }

    def close(self) -> None:
        self.progress.close()
        self.episodes_log.close()
        self.metrics_log.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


class Trainer:
    """One training run (or the next segment of one, with ``resume``). Call ``run()`` once; it returns the
    process exit code.

    Args:
        config: the resolved, validated config.
        info: the inspected env.
        run_dir: the run directory (created here; with ``resume`` it exists and is continued).
        serial: one learner in this process instead of spawned workers.
        force: replace an earlier run in ``run_dir``.
        show_progress: the live display.
        resume: a checkpoint from ``load_resume_checkpoint`` to continue from.
    """

    def __init__(
        self,
        config: Config,
        info: EnvInfo,
        run_dir: Path,
        *,
        serial: bool = False,
        force: bool = False,
        show_progress: bool = True,
        resume: dict[str, Any] | None = None,
    ):
        self.config = config
        self.info = info
        self.serial = serial
        torch.set_num_threads(1)  # DESIGN invariant 3: measured 10x slower on 2 cores without it
        torch.manual_seed(config.seed)
        # All parameters are views into one flat shared buffer that the optimizer steps (a3c/flat.py); its
        # state is created eagerly, in shared memory, before any child starts.
        self.model, self.optimizer = build_shared(config, info.spaces)
        # Observation and return statistics in shared memory, one slot per worker (a3c/normalize.py).
        self.obs_stats = SharedObsStats(info.spaces.obs_shape, config.workers) if config.obs_norm else None
        # Ray's worker actors keep private return statistics (not checkpointed yet: the Ray parity issue).
        ray = config.backend == "ray" and not serial
        self.reward_stats = SharedObsStats((), config.workers) if config.reward_scale and not ray else None
        source = str(run_dir / "checkpoints" / "last.pt")
        if resume is not None:  # restore in place, before anything is written to the run dir
            restore_model(self.model, resume["model_state"], source)
            restore_optimizer(self.optimizer, resume["optimizer_state"], source)
            if self.obs_stats is not None:
                restore_obs_stats(self.obs_stats, resume.get("obs_norm"), source)
            if self.reward_stats is not None:
                restore_reward_stats(self.reward_stats, resume.get("reward_stats"), source)
            elif config.reward_scale and "reward_stats" in resume:
                print(
                    f"warning: {source}'s reward statistics are not used: the Ray backend's workers keep "
                    "their own (reward scaling starts afresh)",
                    file=sys.stderr,
                )
            if "rng_state" in resume:
                torch.set_rng_state(resume["rng_state"])
        assert_shared(self.model, self.optimizer)
        self.resume_index = 0 if resume is None else int(resume.get("resumes", 0)) + 1
        wall_before = 0.0 if resume is None else float(resume["wall_time"])
        self.counters = Counters(
            config.workers,
            *(
                ()
                if resume is None
                else (resume["global_step"], resume["updates"], resume.get("skipped_updates", 0))
            ),
        )
        episodes_kept = 0
        if resume is None:
            self.run_dir = create_run_dir(run_dir, force)
        else:
            self.run_dir = run_dir
            trim_csv(run_dir / "eval.csv", int(resume["global_step"]), wall_before)
            trim_csv(run_dir / "metrics.csv", int(resume["global_step"]), wall_before)
            episodes_kept = trim_csv(run_dir / "episodes.csv", int(resume["global_step"]), wall_before)
        self.metadata = run_metadata()  # once: its git call would start a process at every checkpoint
        metadata = {**config.to_dict(), "serial": serial, **self.metadata, "resumes": self.resume_index}
        write_json(self.run_dir / "config.json", metadata)
        self.start_time = time.time() - wall_before  # wall_time continues across a resume
        self.stop = StopSignal()
        self.heartbeats = Heartbeats(config.workers + 1)
        self.monitor = RunMonitor(config, self.run_dir, self.counters, self.start_time, show_progress, serial)
        if resume is not None:
            self.monitor.episodes = episodes_kept
            self.monitor.best_mean = resume.get("best_mean_return")
            # Before best_selection_mean existed, best.pt was chosen by its mean_return.
            self.monitor.best_selection = resume.get("best_selection_mean", self.monitor.best_mean)
            solved = resume.get("solved_at")
            self.monitor.solved_at = None if solved is None else (float(solved[0]), int(solved[1]))
        self.supervisor: Supervisor | None = None
        self.ray_run = None  # a3c.backends.ray.driver.RayRun while a Ray run is live
        self.ray_restarts = 0
        self.signal_received: int | None = None
        self.params_finite = True
        self.last_checkpoint = self.last_finite_check = time.monotonic()

    # -- the pieces both modes share ------------------------------------------------------------------------

    def _on_signal(self, signum, _frame) -> None:
        # Only record it; the supervision loop acts on it within one tick.
        self.signal_received = signum

    def _check_budget_and_signals(self) -> None:
        cfg = self.config
        if self.signal_received is not None:
            self.stop.stop(StopReason.INTERRUPTED)
        elif self.monitor.errors:
            self.stop.stop(StopReason.FAILED)
        elif cfg.max_seconds is not None and time.time() - self.start_time >= cfg.max_seconds:
            self.stop.stop(StopReason.MAX_SECONDS)
        elif cfg.max_steps is not None and self.counters.total_steps >= cfg.max_steps:
            self.stop.stop(StopReason.MAX_STEPS)
        now = time.monotonic()
        if now - self.last_finite_check >= FINITE_CHECK_S:
            self.last_finite_check = now
            self._check_finite()
        if now - self.last_checkpoint >= cfg.checkpoint_interval and self.params_finite:
            try:
                self._save_last()
            except OSError as exc:  # a full disk should not end the run; the last good checkpoint stays
                self.last_checkpoint = now
                print(f"warning: checkpoint failed, the previous one is kept: {exc}", file=sys.stderr)

    def _check_finite(self) -> None:
        """NaN/inf in the shared weights ends the run; the last (good) checkpoint is then not overwritten."""
        if not self.params_finite:
            return
        if self.ray_run is not None:  # the weights live in the server: it counts, the driver gets a verdict
            counts = self.ray_run.non_finite_counts()
        else:
            counts = non_finite_counts(self.model)
        bad = {name: count for name, count in counts.items() if count}
        if bad:
            self.params_finite = False
            where = ", ".join(f"{name} ({count} values)" for name, count in bad.items())
            self.monitor.errors.append(
                ErrorRecord(
                    "trainer",
                    f"the shared parameters became non-finite (NaN or inf) in {where}; training stopped and "
                    "checkpoints/last.pt was left as the last good checkpoint (try a lower lr)",
                )
            )

    def _snapshot(self) -> dict[str, Any]:
        """The shared state as one instant (DESIGN invariant 10): weights, optimizer moments and steps,
        counters and statistics, each copied once and back to back, before anything slow (a save) runs.
        The workers keep writing meanwhile; a checkpoint must not pair these weights with later moments."""
        with torch.no_grad():
            model_state = {k: v.clone() for k, v in self.model.state_dict().items()}
            optimizer_state = self.optimizer.state_dict()
            optimizer_state["state"] = {
                i: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                for i, s in optimizer_state["state"].items()
            }
        return {
            "model_state": model_state,
            "optimizer_state": optimizer_state,
            **self.counters.snapshot(),
            **({} if self.obs_stats is None else {"obs_norm": self.obs_stats.state_dict()}),
            **({} if self.reward_stats is None else {"reward_stats": self.reward_stats.state_dict()}),
        }

    def _checkpoint_payload(self) -> dict[str, Any]:
        state = self._snapshot()
        return {
            "config": self.config.to_dict(),
            "spaces": self.info.spaces.to_dict(),
            "obs_dim": self.info.obs_dim,  # for an older a3c (flat Discrete envs only)
            "n_actions": self.info.n_actions,
            **state,
            "episodes": self.monitor.episodes,
            "wall_time": time.time() - self.start_time,
            "best_mean_return": self.monitor.best_mean,
            "best_selection_mean": self.monitor.best_selection,
            "solved_at": self.monitor.solved_at,
            "resumes": self.resume_index,
            "rng_state": torch.get_rng_state(),
            **self.metadata,
        }

    def _save_last(self) -> None:
        """Write checkpoints/last.pt atomically and keep the ``keep_checkpoints`` previous ones beside it."""
        self.last_checkpoint = time.monotonic()
        folder = self.run_dir / "checkpoints"
        if self.ray_run is not None:
            self.ray_run.sync()
        payload = self._checkpoint_payload()
        # The finiteness check runs once a second: look again at exactly what is about to be saved (the
        # payload holds copies), so a NaN that appeared since can never replace the last good checkpoint.
        if not all(bool(torch.isfinite(t).all()) for t in payload["model_state"].values()):
            self._check_finite()
            return
        save_checkpoint(folder / "last.pt", payload)
        if self.config.keep_checkpoints > 0:
            # A hard link: the history costs no copy, and last.pt's next os.replace leaves this inode alone.
            history = folder / f"step-{payload['global_step']:012d}.pt"
            try:
                history.unlink(missing_ok=True)
                os.link(folder / "last.pt", history)
            except OSError as exc:  # a file system without hard links: last.pt itself is fine
                print(f"warning: no checkpoint history ({exc})", file=sys.stderr)
        # The newest step-*.pt is last.pt itself: keep_checkpoints earlier ones stay beside it.
        for old in sorted(folder.glob("step-*.pt"))[: -(self.config.keep_checkpoints + 1)]:
            old.unlink(missing_ok=True)

    def _evaluator(self) -> Evaluator:
        return Evaluator(
            self.config,
            self.model,
            self.counters,
            self.run_dir,
            child_seed(self.config.seed, self.config.workers, 0, self.resume_index),
            self.start_time,
            self.info.spaces,
            self._best(),
            self.obs_stats,
        )

    def _best(self) -> float:
        return -float("inf") if self.monitor.best_selection is None else self.monitor.best_selection

    # -- run ---------------------------------------------------------------------------------------------

    def run(self) -> int:
        """Train until the target, a budget, a signal or a failure; write last.pt and summary.json."""
        old_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
            try:
                if self.serial:
                    self._run_serial()
                elif self.config.backend == "ray":
                    self._run_ray()
                else:
                    self._run_spawned()
            except Exception:
                self.monitor.errors.append(ErrorRecord("trainer", traceback.format_exc()))
            return self._finish()
        finally:
            for s, handler in old_handlers.items():
                signal.signal(s, handler)

    def _run_serial(self) -> None:
        learner = Learner(
            self.config,
            self.model,
            self.optimizer,
            child_seed(self.config.seed, 0, 0, self.resume_index),
            lambda: self.counters.total_updates,
            None if self.obs_stats is None else self.obs_stats.writer(0),
            None if self.reward_stats is None else self.reward_stats.writer(0),
        )
        window = MetricsWindow(0)
        evaluator = self._evaluator()
        next_eval = time.monotonic() + self.config.eval_interval
        interrupted = lambda: self.signal_received is not None  # noqa: E731
        try:
            while not self.stop.is_set():
                run_learner(
                    0, learner, self.counters, self.stop, self.monitor.handle, self.start_time, window, 1
                )
                if time.monotonic() >= next_eval:
                    self._serial_eval(evaluator, interrupted)
                    next_eval = time.monotonic() + self.config.eval_interval
                self._check_budget_and_signals()
                self.monitor.refresh()
            if window.lags:  # the last, partial metrics window
                wall_time = round(time.time() - self.start_time, 3)
                self.monitor.handle(window.record(wall_time, self.counters.total_steps, self.config.lr))
            if self.stop.reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS):
                self._serial_eval(evaluator, interrupted)
        finally:
            learner.close()
            evaluator.close()

    def _serial_eval(self, evaluator: Evaluator, interrupted) -> None:
        record = evaluator.evaluate(interrupted)
        if record is not None:
            self.monitor.handle(record)
            if record.solved:
                self.stop.stop(StopReason.SOLVED)

    def _child_specs(self) -> list[ChildSpec]:
        cfg, seed, resume = self.config, self.config.seed, self.resume_index
        shared = (self.counters, self.stop, self.heartbeats)
        specs = [
            ChildSpec(
                f"worker {i}",
                i,
                worker_main,
                lambda restart, conn, i=i: (
                    i,
                    cfg,
                    self.model,
                    self.optimizer,
                    *shared,
                    conn,
                    child_seed(seed, i, restart, resume),
                    self.start_time,
                    self.obs_stats,
                    self.reward_stats,
                ),
            )
            for i in range(cfg.workers)
        ]
        specs.append(
            ChildSpec(
                "evaluator",
                cfg.workers,
                evaluator_main,
                lambda restart, conn: (
                    cfg,
                    self.model,
                    *shared,
                    conn,
                    self.run_dir,
                    child_seed(seed, cfg.workers, restart, resume),
                    self.start_time,
                    self.info.spaces,
                    self._best(),
                    self.obs_stats,
                ),
            )
        )
        return specs

    def _run_spawned(self) -> None:
        self.supervisor = supervisor = Supervisor(
            child_context(),
            self._child_specs(),
            self.heartbeats,
            self.monitor.handle,
            self.config.max_restarts,
            self.config.hang_timeout,
        )
        try:
            supervisor.start_all()
            while not self.stop.is_set():
                supervisor.poll(TICK_S, stopped=self.stop.is_set)
                if supervisor.failure is not None:
                    self.monitor.errors.append(supervisor.failure)
                self._check_budget_and_signals()
                self.monitor.refresh()
        finally:
            self.stop.stop(StopReason.FAILED if self.monitor.errors else StopReason.INTERRUPTED)
            grace = FINAL_EVAL_GRACE_S if self.stop.reason.is_budget else STOP_GRACE_S
            deadline = time.monotonic() + grace

            def current_deadline() -> float:  # a Ctrl-C during the final evaluation cuts it short
                nonlocal deadline
                if self.signal_received is not None:
                    deadline = min(deadline, time.monotonic() + STOP_GRACE_S)
                return deadline

            supervisor.stop_all(current_deadline)

    def _run_ray(self) -> None:
        """The Ray backend (a3c/ray_backend.py): the same loop, with actors instead of child processes."""
        from a3c.backends.ray.driver import ActorFailed, RayRun

        cfg = self.config
        self.ray_run = run = RayRun(
            cfg,
            self.info.spaces,
            self.model,
            self.optimizer,
            self.counters,
            self.run_dir,
            self.start_time,
            (cfg.seed, child_seed(cfg.seed, cfg.workers, 0, self.resume_index)),
            self.resume_index,
            self._best(),
        )
        try:
            while not self.stop.is_set():
                for record in run.poll(TICK_S):
                    self._take_ray_record(record)
                self._check_budget_and_signals()
                self.monitor.refresh()
            budget_end = self.stop.reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS)
            if budget_end and not self.monitor.errors and self.signal_received is None:
                self._take_ray_record(run.final_evaluation())
        except ActorFailed as exc:  # the server hung or died under a checkpoint's sync or the finite check
            self._take_ray_record(exc.record())
        finally:
            self.ray_restarts = run.restarts
            self.ray_run = None
            # Its last sync leaves the final state in self.model / self.optimizer / self.counters.
            for record in run.stop():
                self._take_ray_record(record)

    def _take_ray_record(self, record: Any) -> None:
        if record is None:
            return
        self.monitor.handle([record] if isinstance(record, EpisodeRecord) else record)
        if isinstance(record, EvalRecord) and record.solved:
            self.stop.stop(StopReason.SOLVED)

    def _finish(self) -> int:
        self._check_finite()
        reason = self.stop.reason
        if self.monitor.errors:
            reason = StopReason.FAILED
        elif self.signal_received is not None:
            reason = StopReason.INTERRUPTED
        if reason == StopReason.INTERRUPTED:
            signum = self.signal_received or signal.SIGINT
            exit_code, exit_reason = 128 + signum, signal.Signals(signum).name
        else:
            exit_code, exit_reason = EXIT_CODES[reason], reason.name.lower()
        if reason == StopReason.FAILED:
            first = self.monitor.errors[0]
            exit_reason = f"failed: {first.source}"
            print(f"error: {first.source} failed:\n{first.traceback.rstrip()}", file=sys.stderr)
        if self.params_finite:
            try:
                self._save_last()
            except OSError as exc:  # still write the summary below
                print(f"error: could not write checkpoints/last.pt: {exc}", file=sys.stderr)
                exit_code = exit_code or 1
        restarts = self.ray_restarts if self.supervisor is None else self.supervisor.restarts
        summary = self.monitor.summary(exit_reason, restarts)
        write_json(self.run_dir / "summary.json", summary)
        self.monitor.refresh()  # the display ends on the final totals
        self.monitor.close()
        print(format_summary(summary, self.run_dir), flush=True)
        return exit_code


def format_summary(summary: dict[str, Any], run_dir: Path) -> str:
    """The one-paragraph report printed at the end of a run."""
    solved = (
        f"solved in {summary['time_to_solve_s']:.1f} s, {summary['steps_to_solve']:,} steps"
        if summary["solved"]
        else "not solved"
    )
    best = summary["best_mean_return"]
    best_text = "-" if best is None else f"{best:.1f}"
    return (
        f"{summary['env_id']}: {solved} (best eval {best_text}, target {summary['target_return']}); "
        f"{summary['total_steps']:,} steps in {summary['wall_s']:.1f} s "
        f"= {summary['steps_per_s']:,} steps/s; "
        f"exit: {summary['exit_reason']}\nrun dir: {run_dir}"
    )
