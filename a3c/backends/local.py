"""The local backend: workers and the evaluator as child processes over shared memory (Hogwild), started
from the forkserver and watched by the Supervisor (heartbeats, hang timeout, restarts within a budget)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from a3c.algo.optim import non_finite_counts
from a3c.core.seeding import child_seed
from a3c.runtime.context import child_context
from a3c.runtime.counters import StopReason
from a3c.runtime.evaluator import FINAL_EVAL_GRACE_S, evaluator_main, final_eval_grace_s
from a3c.runtime.state import SharedState
from a3c.runtime.supervisor import ChildSpec, Supervisor
from a3c.runtime.worker import worker_main

# Children get this long to exit after an interrupt or a failure (final_eval_grace_s after a budget stop,
# when the evaluator still plays its final evaluation).
STOP_GRACE_S = 3.0
EVALUATOR = "evaluator"  # the evaluator child's name, among the workers'


def worker_specs(
    shared: SharedState, ids: Iterable[int], resume_index: int, first_restart: int = 0
) -> list[ChildSpec]:
    """Workers ``ids`` (heartbeat slot = id); a restart gets a fresh seed from ``child_seed``, counted from
    ``first_restart`` (a restarted Ray node group's workers: streams of their own)."""
    seed = shared.config.seed

    def worker(i: int) -> ChildSpec:
        return ChildSpec(
            f"worker {i}",
            i,
            worker_main,
            lambda restart, conn: dict(
                worker_id=i,
                shared=shared,  # the global model, its optimizer, counters, heartbeats, the stop signal
                conn=conn,  # records to the trainer
                seed=child_seed(seed, i, first_restart + restart, resume_index),
            ),
        )

    return [worker(i) for i in ids]


def child_specs(shared: SharedState, resume_index: int, best_mean: Callable[[], float]) -> list[ChildSpec]:
    """Every process of a local run besides the trainer, as mnist_hogwild starts its workers: workers
    0 … N-1 (``worker_main``: a Learner on the shared model) and the evaluator (``evaluator_main``, heartbeat
    slot N); all of them are started, restarted and stopped by the ``Supervisor`` (``a3c.runtime.supervisor``,
    from the forkserver). A restart gets a fresh seed from ``child_seed``, a restarted evaluator the best
    evaluation so far (``best_mean()``)."""
    workers, seed = shared.config.workers, shared.config.seed
    evaluator = ChildSpec(
        EVALUATOR,
        workers,
        evaluator_main,
        lambda restart, conn: dict(
            shared=shared,
            conn=conn,
            seed=child_seed(seed, workers, restart, resume_index),
            best_mean=best_mean(),
        ),
    )
    return [*worker_specs(shared, range(workers), resume_index), evaluator]


class LocalBackend:
    """Starts the children at once; their records reach ``poll`` through the Supervisor."""

    def __init__(self, shared: SharedState, resume_index: int, best_mean: Callable[[], float]):
        self.shared = shared
        self.records: list[Any] = []
        cfg = shared.config
        self.supervisor = Supervisor(
            child_context(),
            child_specs(shared, resume_index, best_mean),
            shared.heartbeats,
            self.records.append,
            cfg.max_restarts,
            cfg.hang_timeout,
        )
        try:
            self.supervisor.start_all()
        except BaseException:  # the children already started must not outlive a failed start
            shared.stop.stop(StopReason.FAILED)
            deadline = time.monotonic() + STOP_GRACE_S
            self.supervisor.stop_all(lambda: deadline)
            raise

    @property
    def restarts(self) -> int:
        """Child restarts so far, counted by the Supervisor."""
        return self.supervisor.restarts

    def _evaluator_alive(self) -> bool:
        """Whether the evaluator child's process is running."""
        return any(
            c.spec.name == EVALUATOR and c.process is not None and c.process.is_alive()
            for c in self.supervisor.children
        )

    def _take(self) -> list[Any]:
        records, self.records[:] = list(self.records), []
        return records

    def poll(self, timeout: float) -> list[Any]:
        """The children's records within ``timeout`` s; a child that failed beyond its restarts (or hung) is
        an ErrorRecord."""
        self.supervisor.poll(timeout, stopped=self.shared.stop.is_set)
        records = self._take()
        if self.supervisor.failure is not None:
            records.append(self.supervisor.failure)
        return records

    def non_finite_counts(self) -> dict[str, int]:
        """NaN/inf counts of the shared model's parameters, read from a copy."""
        return non_finite_counts(self.shared.model)

    def sync(self) -> None:
        """The trainer's model is the shared one: nothing to copy."""

    def final_evaluation(self) -> list[Any]:
        """The evaluator child plays it itself when it sees a budget stop (within ``final_eval_grace_s``)."""
        return []

    def stop(self, cut_short: Callable[[], bool]) -> list[Any]:
        """Stop the children: ``final_eval_grace_s`` after a max-steps or max-seconds stop (the evaluator's
        final evaluation and rescoring), FINAL_EVAL_GRACE_S after a solve, else STOP_GRACE_S. A Ctrl-C
        meanwhile (``cut_short()``), or the evaluator's exit, leaves the others STOP_GRACE_S from then: the
        supervisor does not look for hangs while it waits."""
        reason = self.shared.stop.reason
        grace = STOP_GRACE_S
        if reason in (StopReason.MAX_STEPS, StopReason.MAX_SECONDS):
            grace = final_eval_grace_s(self.shared.start_time.elapsed())
            if grace > FINAL_EVAL_GRACE_S:
                print(
                    f"{reason.name.lower()} reached: the final evaluation and best.pt's rescoring may take "
                    f"up to {grace:.0f} s (Ctrl-C skips them)",
                    file=sys.stderr,
                    flush=True,
                )
        elif reason is StopReason.SOLVED:
            grace = FINAL_EVAL_GRACE_S
        deadline = time.monotonic() + grace

        def current_deadline() -> float:
            nonlocal deadline
            if cut_short() or not self._evaluator_alive():
                deadline = min(deadline, time.monotonic() + STOP_GRACE_S)
            return deadline

        self.supervisor.stop_all(current_deadline)
        return self._take()
