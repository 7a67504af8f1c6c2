"""The trainer: run dir, shared state, spawned workers and evaluator, supervision, clean shutdown, summary.

``Trainer.run`` is the whole of ``a3c train`` after the config is resolved. Serial mode runs one Learner and
the Evaluator in this process (no spawn) with the same code and the same files.
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp

from a3c.config import Config
from a3c.evaluator import Evaluator, evaluator_main
from a3c.learner import Learner, build_model
from a3c.progress import Progress
from a3c.records import ErrorRecord, EvalRecord
from a3c.runs import EPISODE_COLUMNS, CsvLog, create_run_dir, run_metadata, save_checkpoint, write_json
from a3c.shared import Counters, StopReason, StopSignal, assert_shared, make_optimizer
from a3c.worker import run_learner, worker_main
from envs import EnvInfo

TICK_S = 0.1  # supervision period: how often the trainer looks at children, budgets and signals
CHECKPOINT_EVERY_S = 60.0
STOP_GRACE_S = 3.0  # children get this long to exit after an interrupt or a failure ...
FINAL_EVAL_GRACE_S = 60.0  # ... and this long when the evaluator still plays its final evaluation
DRAIN_MAX = 500  # messages handled per supervision tick, so a flood of records cannot starve supervision
EXIT_CODES = {StopReason.SOLVED: 0, StopReason.MAX_STEPS: 0, StopReason.MAX_SECONDS: 0, StopReason.FAILED: 1}


def child_seeds(seed: int, count: int) -> list[int]:
    """Independent seeds for the workers and, last, the evaluator (no two processes share a stream)."""
    return [int(s.generate_state(1)[0] % 2**30) for s in np.random.SeedSequence(seed).spawn(count)]


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
        self.config_serial = serial
        self.counters = counters
        self.start_time = start_time
        self.episodes_log = CsvLog(run_dir / "episodes.csv", EPISODE_COLUMNS)
        self.episodes = 0
        self.last_eval: EvalRecord | None = None
        self.solved_eval: EvalRecord | None = None
        self.best_mean: float | None = None
        self.errors: list[ErrorRecord] = []
        self.progress = Progress(config.max_steps, enabled=show_progress)

    def handle(self, record: Any) -> None:
        """Take one message: a list of EpisodeRecord (one update's), an EvalRecord or an ErrorRecord."""
        if isinstance(record, list):
            for episode in record:
                self.episodes += 1
                self.episodes_log.write(episode)
        elif isinstance(record, EvalRecord):
            self.last_eval = record
            self.best_mean = record.best_mean_return
            if record.solved and self.solved_eval is None:
                self.solved_eval = record
        elif isinstance(record, ErrorRecord):
            self.errors.append(record)

    def refresh(self) -> None:
        last = None if self.last_eval is None else self.last_eval.mean_return
        self.progress.update(self.counters.total_steps, self.episodes, last, self.best_mean)

    def summary(self, exit_reason: str) -> dict[str, Any]:
        wall_s = time.time() - self.start_time
        total = self.counters.total_steps
        solved = self.solved_eval
        # In serial mode the evaluator shares this process, so its CPU time cannot be told apart.
        cpu_s = None if self.last_eval is None or self.config_serial else self.last_eval.cpu_s
        return {
            "env_id": self.config.env_id,
            "solved": solved is not None,
            "target_return": self.config.target_return,
            "time_to_solve_s": None if solved is None else solved.wall_time,
            "steps_to_solve": None if solved is None else solved.global_step,
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
        }

    def close(self) -> None:
        self.progress.close()
        self.episodes_log.close()


class Trainer:
    """One training run. Call ``run()`` once; it returns the process exit code."""

    def __init__(
        self,
        config: Config,
        info: EnvInfo,
        run_dir: Path,
        *,
        serial: bool = False,
        force: bool = False,
        show_progress: bool = True,
        argv: list[str] | None = None,
    ):
        self.config = config
        self.info = info
        self.serial = serial
        self.run_dir = create_run_dir(run_dir, force)
        write_json(self.run_dir / "config.json", {**config.to_dict(), "serial": serial, **run_metadata(argv)})
        self.start_time = time.time()
        torch.set_num_threads(1)  # DESIGN invariant 3: measured 10x slower on 2 cores without it
        torch.manual_seed(config.seed)
        self.model = build_model(config, info.obs_dim, info.n_actions)
        self.model.share_memory()
        # The optimizer's state is created eagerly here, in shared memory, before any child starts.
        self.optimizer = make_optimizer(
            config.optimizer, self.model.parameters(), config.lr, config.optimizer_eps
        )
        assert_shared(self.model, self.optimizer)
        self.counters = Counters(config.workers)
        self.stop = StopSignal()
        self.monitor = RunMonitor(config, self.run_dir, self.counters, self.start_time, show_progress, serial)
        self.seeds = child_seeds(config.seed, config.workers + 1)
        self.signal_received: int | None = None
        self.last_checkpoint = time.monotonic()

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
        if time.monotonic() - self.last_checkpoint >= CHECKPOINT_EVERY_S:
            try:
                self._save_last()
            except OSError as exc:  # a full disk should not end the run; the final save will try again
                print(f"warning: periodic checkpoint failed: {exc}", file=sys.stderr)

    def _save_last(self) -> None:
        self.last_checkpoint = time.monotonic()
        worker_steps, worker_updates = self.counters.snapshot()
        save_checkpoint(
            self.run_dir / "checkpoints" / "last.pt",
            {
                "config": self.config.to_dict(),
                "obs_dim": self.info.obs_dim,
                "n_actions": self.info.n_actions,
                "model_state": self.model.state_dict(),
                "optimizer_state": self.optimizer.state_dict(),
                "worker_steps": torch.from_numpy(worker_steps),
                "worker_updates": torch.from_numpy(worker_updates),
                "global_step": int(worker_steps.sum()),
                "updates": int(worker_updates.sum()),
                "wall_time": time.time() - self.start_time,
                "mean_return": self.monitor.best_mean,
            },
        )

    def _evaluator(self) -> Evaluator:
        return Evaluator(
            self.config,
            self.model,
            self.counters,
            self.run_dir,
            self.seeds[-1],
            self.start_time,
            self.info.obs_dim,
            self.info.n_actions,
        )

    # -- run ---------------------------------------------------------------------------------------------

    def run(self) -> int:
        """Train until the target, a budget, a signal or a failure; write last.pt and summary.json."""
        old_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            # SIGTERM is ours from the start; SIGINT too, except while children start (see _run_spawned).
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
            try:
                self._run_serial() if self.serial else self._run_spawned()
            except Exception:
                self.monitor.errors.append(ErrorRecord("trainer", traceback.format_exc()))
            return self._finish()
        finally:
            for s, handler in old_handlers.items():
                signal.signal(s, handler)

    def _run_serial(self) -> None:
        learner = Learner(self.config, self.model, self.optimizer, self.seeds[0])
        evaluator = self._evaluator()
        next_eval = time.monotonic() + self.config.eval_interval
        interrupted = lambda: self.signal_received is not None  # noqa: E731
        try:
            while not self.stop.is_set():
                run_learner(0, learner, self.counters, self.stop, self.monitor.handle, self.start_time, 1)
                if time.monotonic() >= next_eval:
                    self._serial_eval(evaluator, interrupted)
                    next_eval = time.monotonic() + self.config.eval_interval
                self._check_budget_and_signals()
                self.monitor.refresh()
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

    def _run_spawned(self) -> None:
        cfg = self.config
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        children: dict[str, mp.Process] = {}
        for i in range(cfg.workers):
            children[f"worker {i}"] = ctx.Process(
                target=worker_main,
                name=f"a3c-worker-{i}",
                args=(
                    i,
                    cfg,
                    self.model,
                    self.optimizer,
                    self.counters,
                    self.stop,
                    queue,
                    self.seeds[i],
                    self.start_time,
                ),
            )
        children["evaluator"] = ctx.Process(
            target=evaluator_main,
            name="a3c-evaluator",
            args=(
                cfg,
                self.model,
                self.counters,
                self.stop,
                queue,
                self.run_dir,
                self.seeds[-1],
                self.start_time,
                self.info.obs_dim,
                self.info.n_actions,
            ),
        )
        try:
            # Children inherit an ignored SIGINT (Python then installs no KeyboardInterrupt handler in them),
            # so a Ctrl-C in the terminal, sent to the whole process group, reaches only this process, which
            # stops them in order through the stop flag.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                for child in children.values():
                    child.start()
            finally:
                signal.signal(signal.SIGINT, self._on_signal)
            self._supervise(children, queue)
        finally:
            self._shutdown(children, queue)

    def _drain(self, queue, limit: int | None = DRAIN_MAX) -> None:
        handled = 0
        while not queue.empty() and (limit is None or handled < limit):
            self.monitor.handle(queue.get())
            handled += 1

    def _supervise(self, children: dict[str, mp.Process], queue) -> None:
        watched = dict(children)
        while not self.stop.is_set():
            self._drain(queue)
            self._check_budget_and_signals()  # signals first: a child's death after one is not a failure
            for name, child in list(watched.items()):
                if child.exitcode is None:
                    continue
                del watched[name]
                if child.exitcode != 0 and not self.stop.is_set():
                    self._drain(queue, limit=None)  # its ErrorRecord, if it managed to send one
                    if not any(e.source == name for e in self.monitor.errors):
                        self.monitor.errors.append(
                            ErrorRecord(name, f"{name} died with exit code {child.exitcode}")
                        )
                    self.stop.stop(StopReason.FAILED)
            self.monitor.refresh()
            wait([c.sentinel for c in watched.values()], timeout=TICK_S)

    def _shutdown(self, children: dict[str, mp.Process], queue) -> None:
        """Stop every child: the stop flag, then joins under a deadline, then terminate, then kill."""
        self.stop.stop(StopReason.FAILED if self.monitor.errors else StopReason.INTERRUPTED)
        started = [c for c in children.values() if c.pid is not None]
        grace = FINAL_EVAL_GRACE_S if self.stop.reason.is_budget else STOP_GRACE_S
        deadline = time.monotonic() + grace
        while any(c.is_alive() for c in started) and time.monotonic() < deadline:
            if self.signal_received is not None:
                deadline = min(
                    deadline, time.monotonic() + STOP_GRACE_S
                )  # a Ctrl-C cuts the final eval short
            self._drain(queue)  # a child blocked on a full pipe could not exit otherwise
            wait([c.sentinel for c in started if c.is_alive()], timeout=TICK_S)
        for child in started:
            if child.is_alive():
                child.terminate()  # SIGTERM: the child's guard ends its loop at the next update
        for child in started:
            child.join(timeout=2.0)
            if child.is_alive():
                child.kill()
                child.join(timeout=2.0)
        self._drain(queue, limit=None)
        queue.close()

    def _finish(self) -> int:
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
        try:
            self._save_last()
        except OSError as exc:  # still write the summary below
            print(f"error: could not write checkpoints/last.pt: {exc}", file=sys.stderr)
            exit_code = exit_code or 1
        summary = self.monitor.summary(exit_reason)
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
