"""One training run: build (or resume) the shared state and the run dir, then ONE loop over any backend —
poll records → monitor → budgets and signals → finite check → periodic checkpoint — then finish
(last.pt, summary.json, the exit code).

``Trainer.run`` is the whole of ``a3c train`` after the config is resolved. Where the learners run is the
backend's business (a3c/backends): ``serial`` (this process), ``local`` (child processes), ``ray`` (actors).
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from a3c.algo.health import LearningHealth, box_entropy_floor, max_entropy
from a3c.algo.optim import flat_view, non_finite_counts
from a3c.backends.base import Backend, BackendFailed
from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.core.records import EpisodeRecord, ErrorRecord, EvalRecord
from a3c.core.seeding import child_seed
from a3c.core.user_code import CodeBook, by_value
from a3c.rundir import checkpoints
from a3c.rundir.files import create_run_dir, run_metadata, write_json
from a3c.rundir.lock import lock_run_dir, still_held, unlock
from a3c.rundir.replace import has_aside, settle
from a3c.rundir.resume import latest_logged_time, trim_logs
from a3c.runtime.counters import StopReason
from a3c.runtime.run_clock import RunClock
from a3c.runtime.state import SharedState, build_state
from a3c.training.callbacks import CallbackFailed, Callbacks, RunContext
from a3c.training.monitor import RunMonitor, format_summary
from a3c.training.outcome import error_line, error_record, exit_status
from a3c_envs import EnvInfo
from a3c_envs.user_envs import code_references

TICK_S = 0.1  # supervision period: how often the trainer looks at children, budgets and signals
# A stop, not a crash: Ctrl-C, a scheduler's or `timeout`'s SIGTERM, and the SIGHUP of a closed terminal or a
# dropped ssh session: each ends the run with last.pt, summary.json and exit 128 + the signal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FINITE_CHECK_S = 1.0  # how often the shared parameters are checked for NaN/inf


class Trainer:
    """One training run (or the next segment of one, with ``resume``); ``run()`` once returns its exit code.

    Args:
        config: the resolved, validated config.
        info: the inspected env.
        run_dir: the run directory (created here, or continued with ``resume``), locked: invariant 12.
        serial: one learner in this process instead of spawned workers.
        force: replace an earlier run in ``run_dir``.
        show_progress: the live display.
        resume: a checkpoint from ``load_resume_checkpoint`` to continue from.
        callbacks: objects with any of on_start, on_eval, on_episode, on_metrics, on_end
            (``a3c.training.callbacks``), called in this process as the rows arrive; a tracker's
            (``config.track``) is added after them.
    """

    def __init__(  # noqa: PLR0913 - keyword-only past the run dir, by name as a3c train and a3c tune pass them
        self,
        config: Config,
        info: EnvInfo,
        run_dir: Path,
        *,
        serial: bool = False,
        force: bool = False,
        show_progress: bool = True,
        resume: dict[str, Any] | None = None,
        callbacks: Iterable[Any] = (),
    ):
        self.config, self.info, self.serial = config, info, serial
        self.callbacks = Callbacks(callbacks)  # checked before the run dir is claimed; the tracker last
        self.callbacks.active += tracker_callbacks(config)
        torch.set_num_threads(1)  # invariant 3: measured 10x slower on 2 cores without it
        torch.manual_seed(config.seed)
        state = build_state(config, info.spaces, resume, str(run_dir / "checkpoints" / "last.pt"))
        self.model, self.optimizer, self.counters = state.model, state.optimizer, state.counters
        self.obs_stats, self.reward_stats, self.stop = state.obs_stats, state.reward_stats, state.stop
        self.resume_index = 0 if resume is None else int(resume.get("resumes", 0)) + 1
        wall_before = 0.0 if resume is None else float(resume["wall_time"])
        code = user_code_book(config)  # before the run dir: an object that cannot be sent is bad input
        self.run_dir, self.lock = claim(run_dir, force, resume is not None, config.checkpoint_interval)
        self.lock_lost: str | None = None  # why, once another writer may have the run dir
        try:  # held from here: released if the run cannot start (a caller in this process may retry)
            episodes_kept = 0 if resume is None else trim_logs(run_dir, resume)
            self.metadata = run_metadata()  # once: its git call would start a process at every checkpoint
            metadata = {
                **config.to_dict(),
                "serial": serial,
                "device_used": str(flat_view(self.model).device),  # what ``device`` resolved to here
                **self.metadata,
                "resumes": self.resume_index,
            }
            write_json(self.run_dir / "config.json", metadata)
            # The user's objects no child can import by name go to every child by value (forkserver), and
            # into the run dir for a later a3c.load/a3c.resume in Python (the command never reads them).
            code.save(self.run_dir)
            if resume is not None:  # an evaluation the checkpoint holds may have ended after it
                wall_before = max(wall_before, latest_logged_time(run_dir))
            self.start_time = RunClock.started(wall_before)  # wall_time continues across a resume
            self.shared = dataclasses.replace(
                state, run_dir=self.run_dir, start_time=self.start_time, code=code, hangup_ignored=nohup()
            )
            self.monitor = RunMonitor(config, run_dir, self.counters, self.start_time, show_progress, serial)
            self.monitor.health = learning_health(config, info)
            if resume is not None:
                self.monitor.resumed(resume, episodes_kept)
        except OSError as exc:  # a full disk or a read-only folder at the start: one line, nothing replaced
            self.lock = release(self.run_dir, self.lock)
            raise BadInput(f"--run-dir: {str(run_dir)!r} cannot be written ({exc.strerror or exc})") from None
        except BaseException:
            self.lock = release(self.run_dir, self.lock)
            raise
        self.backend: Backend | None = None  # while the loop runs
        self.restarts, self.signal_received = 0, None
        self.params_finite, self.handle_failed = True, False
        self.last_checkpoint = self.last_finite_check = time.monotonic()

    # -- the one loop ---------------------------------------------------------------------------------------

    def run(self) -> int:
        """Train until the target, a budget, a signal or a failure; write last.pt and summary.json."""
        stop_signals = [s for s in STOP_SIGNALS if not (s == signal.SIGHUP and self.shared.hangup_ignored)]
        old_handlers = {s: signal.getsignal(s) for s in stop_signals}
        try:
            for s in stop_signals:
                signal.signal(s, self._on_signal)
            try:
                self._start_callbacks()
                self._loop()
            except CallbackFailed as exc:  # an on_start: the learners never started
                self.monitor.errors.append(exc.record)
            except Exception as exc:
                self.monitor.errors.append(error_record(exc))
            return self._finish()
        finally:
            for s, handler in old_handlers.items():
                signal.signal(s, handler)
            self.lock = release(self.run_dir, self.lock) if self.lock_lost is None else unlock(self.lock)

    def _start_callbacks(self) -> None:
        """The callbacks' ``on_start``; the time they take (a tracker's connection) is not the run's."""
        began = time.monotonic()
        self.callbacks.start(self._context())
        self.start_time = self.start_time.later(time.monotonic() - began)
        self.monitor.start_time = self.start_time
        self.shared = dataclasses.replace(self.shared, start_time=self.start_time)

    def _loop(self) -> None:
        interrupted = lambda: self.signal_received is not None  # noqa: E731
        budget_end, before_final = False, None
        self.backend = backend = start_backend(
            self.shared, self.serial, self.resume_index, self.monitor.best_or_nothing, interrupted
        )
        try:
            while not self.stop.is_set():
                self._take(backend.poll(TICK_S))
                self._check_budget_and_signals()
                show(self.monitor.refresh)
            budget_end = self.stop.reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS)
            before_final = self.monitor.last_eval  # a budget stop's final evaluation comes after it
            if budget_end and not self.monitor.errors and self.signal_received is None:
                self._take(backend.final_evaluation())
        except BackendFailed as exc:  # e.g. the Ray server hung under a checkpoint's sync or the finite check
            self._take([exc.record()])
        finally:
            # The first reason wins: a loop left by an exception records one, so the children stop.
            self.stop.stop(StopReason.FAILED if self.monitor.errors else StopReason.INTERRUPTED)
            try:
                # A Ray backend's last sync leaves the final state in the trainer's model and counters.
                self._take(backend.stop(interrupted))
                if budget_end and not self.monitor.errors and self.signal_received is None:
                    self._check_final_evaluation(before_final)
            finally:
                self.restarts = backend.restarts
                self.backend = None

    def _check_final_evaluation(self, before_final: Any) -> None:
        """After a budget stop: a final evaluation that did not arrive (cut by the stop's grace, or skipped)
        leaves last_mean_return an older evaluation's. Said in a warning line and summary.json's
        ``final_evaluation_missing`` (a tuner scoring the run by it needs to know)."""
        if self.monitor.last_eval is not before_final:
            return
        self.monitor.final_evaluation_missing = True
        older = (
            "no evaluation" if before_final is None else f"the evaluation at {before_final.wall_time:.1f} s"
        )
        print(
            "warning: the final evaluation did not finish before the run stopped; "
            f"last_mean_return is {older}",
            file=sys.stderr,
            flush=True,
        )

    def _take(self, records: list[Any]) -> None:
        for record in records:
            rows = []
            try:
                rows = self.monitor.handle([record] if isinstance(record, EpisodeRecord) else record)
            except (
                Exception
            ) as exc:  # e.g. a CSV write on a full disk: the run must stop, not lose rows silently
                if not self.handle_failed:  # the first failure says why; the next records still get a try
                    self.handle_failed = True
                    why = f"could not write the run's files: {exc}" if isinstance(exc, OSError) else None
                    self.monitor.errors.append(ErrorRecord("trainer", why or traceback.format_exc()))
            if isinstance(record, EvalRecord) and record.solved:
                self.stop.stop(StopReason.SOLVED)
            for hook, row in rows:
                try:
                    reason = self.callbacks.row(hook, row)
                except CallbackFailed as exc:  # the run stops as failed; its files are kept
                    self.monitor.errors.append(exc.record)
                    self.stop.stop(StopReason.FAILED)
                    continue
                if reason is not None:
                    self.stop.stop(reason)  # the first reason wins: a solved run stays solved

    def _on_signal(self, signum, _frame) -> None:
        # Stop at once: a child ending on the same group signal then ended, and is not restarted as crashed.
        self.signal_received = signum
        self.stop.stop(StopReason.INTERRUPTED)

    def _check_budget_and_signals(self) -> None:
        cfg = self.config
        if self.signal_received is not None:
            self.stop.stop(StopReason.INTERRUPTED)
        elif self.monitor.errors:
            self.stop.stop(StopReason.FAILED)
        elif cfg.max_seconds is not None and self.start_time.elapsed() >= cfg.max_seconds:
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

    # -- checkpoints ---------------------------------------------------------------------------------------

    def _check_finite(self) -> None:
        """NaN/inf in the shared weights ends the run; the last (good) checkpoint is then not overwritten.
        On Ray the backend counts the global weights (read from the shards): no sync of the whole state."""
        if not self.params_finite:
            return
        counts = non_finite_counts(self.model) if self.backend is None else self.backend.non_finite_counts()
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

    def _context(self) -> RunContext:
        """What the callbacks' ``on_start`` gets."""
        config = {**self.config.to_dict(), "serial": self.serial, "resumes": self.resume_index}
        step = self.counters.total_steps
        return RunContext(self.run_dir, config, self.resume_index > 0, step, self._save_copy)

    def _save_copy(self, path: Path | None) -> Path | None:
        """A callback's checkpoint (``RunContext.save_checkpoint``): the shared state now, to ``path``
        (default checkpoints/saved-<global_step>.pt); None when the weights are not finite."""
        payload = self._payload()
        if payload is None:
            return None
        path = path or self.run_dir / "checkpoints" / f"saved-{payload['global_step']:012d}.pt"
        checkpoints.save_checkpoint(path, payload)
        return path

    def _save_last(self) -> None:
        """Write checkpoints/last.pt (and its step-*.pt history) from one snapshot of the shared state."""
        self.last_checkpoint = time.monotonic()
        if self._lock_lost():
            return
        payload = self._payload()
        if payload is not None:
            checkpoints.save_last(self.run_dir / "checkpoints", payload, self.config.keep_checkpoints)

    def _lock_lost(self) -> bool:
        """True once the run dir's lock is no longer this run's (``still_held``): the run stops as failed
        with one error line and writes nothing more there."""
        if self.lock_lost is None and self.lock is not None:
            self.lock_lost = still_held(self.run_dir, self.lock)
            if self.lock_lost is not None:
                lost = f"{self.lock_lost}; stopped without writing"
                self.monitor.errors.append(ErrorRecord("trainer", lost))
                self.stop.stop(StopReason.FAILED)
        return self.lock_lost is not None

    def _payload(self) -> dict[str, Any] | None:
        """A checkpoint of the shared state now (one snapshot), or None when its weights are not finite."""
        if self.backend is not None:
            self.backend.sync()
        payload = checkpoints.checkpoint_payload(
            self.config,
            self.info.spaces,
            **self.shared.snapshot(),
            **self.monitor.checkpoint_fields(),
            wall_time=self.start_time.elapsed(),
            resumes=self.resume_index,
            rng_state=torch.get_rng_state(),
            **self.metadata,
        )
        # The finiteness check runs once a second: look again at exactly what is about to be saved (the
        # payload holds copies), so a NaN that appeared since can never replace the last good checkpoint.
        if not all(bool(torch.isfinite(t).all()) for t in payload["model_state"].values()):
            self._check_finite()
            return None
        return payload

    # -- the end ---------------------------------------------------------------------------------------------

    def _finish(self) -> int:
        self._check_finite()
        saved = True
        if self.params_finite:
            try:
                self._save_last()
            except OSError as exc:  # still write the summary below
                print(f"error: could not write checkpoints/last.pt: {exc}", file=sys.stderr)
                saved = False
        exit_code, exit_reason = exit_status(self.stop.reason, self.monitor.errors, self.signal_received)
        summary = self.monitor.summary(exit_reason, self.restarts)
        ended = self.callbacks.end(summary)  # a tracker logs best.pt and closes its run
        if ended:  # an on_end raised: the run failed after all
            self.monitor.errors += ended
            exit_code, summary["exit_reason"] = exit_status(
                self.stop.reason, self.monitor.errors, self.signal_received
            )
        exit_code = exit_code if saved else exit_code or 1
        if self.lock_lost is None:
            try:  # before anything is shown: a terminal may be gone
                write_json(self.run_dir / "summary.json", summary)
            except OSError as exc:  # a full disk at the end: the checkpoint above stands
                reason = exc.strerror or exc
                show(lambda: print(f"error: could not write summary.json: {reason}", file=sys.stderr))
                exit_code = exit_code or 1
        if self.monitor.errors:
            show(lambda: print(error_line(self.monitor.errors[0]), file=sys.stderr))
        show(self.monitor.refresh)  # the display ends on the final totals
        self.monitor.close()
        show(lambda: print(format_summary(summary, self.run_dir), flush=True))
        return exit_code


def nohup() -> bool:
    """Whether this process was started with SIGHUP ignored (``nohup``): a hangup is then no stop."""
    return signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def show(output: Callable[[], None]) -> None:
    """Write to the terminal, if there still is one: after a SIGHUP (an ssh session dropped) its writes fail
    (EIO), and the run must still end as a stop, its files written."""
    with contextlib.suppress(OSError):
        output()


def tracker_callbacks(config: Config) -> list[Any]:
    """The experiment tracker ``config.track`` asks for, as callbacks ([] for none); imported only then."""
    if config.track == "none":
        return []
    from a3c.training.trackers import tracker

    return [tracker(config.track)]


def learning_health(config: Config, info: EnvInfo) -> LearningHealth:
    """The run's health checks: a categorical's entropy against its uniform's, a Gaussian's against its σ's
    floor (clip) or saturation (tanh)."""
    box_floor = box_entropy_floor(info.spaces, config.squash, config.target_return is not None)
    return LearningHealth(max_entropy(info.spaces), box_floor)


def user_code_book(config: Config) -> CodeBook:
    """The user's objects ``config`` names that a child cannot import by name (``a3c.core.user_code``), to
    send to every child and save in the run dir; BadInput naming the one that cannot be pickled."""
    import cloudpickle

    book = CodeBook(by_value(code_references(config)))
    for ref, obj in book.objects.items():
        try:
            cloudpickle.dumps(obj)
        except Exception as exc:  # noqa: BLE001 - pickling raises many kinds (a lock, a file, a socket)
            field = "env_id" if ref == config.env_id else "model" if ref == config.model else "wrappers"
            raise BadInput(
                f"{field}: {ref!r} cannot be sent to the worker processes ({type(exc).__name__}: "
                f"{str(exc)[:160]}); expected an object cloudpickle can pickle, or one in an importable "
                "module"
            ) from None
    return book


def claim(run_dir: Path, force: bool, resumed: bool, interval: float) -> tuple[Path, int | None]:
    """The run dir and its lock: a new one claimed (``create_run_dir``), or a resumed one locked. The lock's
    lease (``a3c.rundir.lock``) is three checkpoint intervals: it is renewed at every checkpoint."""
    lease = max(3 * interval, 60.0)
    if resumed:
        return run_dir, lock_run_dir(run_dir, "--resume", lease)
    return create_run_dir(run_dir, force, lease)


def release(run_dir: Path, lock: int | None) -> None:
    """Release the run dir's lock; an earlier run that ``--force`` moved aside is put back first when this
    one ends without a checkpoint of its own (``a3c.rundir.replace``: it is discarded at the first)."""
    try:
        if lock is not None and has_aside(run_dir):
            settle(run_dir, "this run ended before its first checkpoint")
    except OSError as exc:
        print(f"error: could not put the earlier run back ({exc}); it is in .a3c-replaced/", file=sys.stderr)
    return unlock(lock)


def start_backend(
    shared: SharedState,
    serial: bool,
    resume_index: int,
    best_mean: Callable[[], float],
    interrupted: Callable[[], bool],
) -> Backend:
    """Start the run's backend: ``serial`` (this process), else ``config.backend`` (local or ray). Seeds come
    from ``child_seed`` (the evaluator's slot is ``workers``); ``best_mean()`` is the best evaluation so far,
    ``interrupted()`` true once a signal arrived."""
    cfg = shared.config
    eval_seed = child_seed(cfg.seed, cfg.workers, 0, resume_index)
    if serial:
        from a3c.backends.serial import SerialBackend

        seeds = (child_seed(cfg.seed, 0, 0, resume_index), eval_seed)
        return SerialBackend(shared, seeds, best_mean(), interrupted)
    if cfg.backend == "ray":
        from a3c.backends.ray.backend import RayBackend  # Ray is an extra: imported only when asked for

        return RayBackend(shared, (cfg.seed, eval_seed), resume_index, best_mean(), interrupted)
    from a3c.backends.local import LocalBackend

    return LocalBackend(shared, resume_index, best_mean)
