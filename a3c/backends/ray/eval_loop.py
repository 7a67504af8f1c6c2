"""The Ray driver's evaluator thread: the ``RemoteEvaluator`` (eval.csv and best.pt on the driver's disk,
episodes played by the ``EvalActor``) at least ``eval_interval`` s apart (``next_wait``), each once the
global step has moved (or best.pt could not be saved), its records queued for the trainer's loop."""

from __future__ import annotations

import dataclasses
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

import ray

from a3c.backends.ray.actor_calls import ActorFailed
from a3c.backends.ray.eval_actor import EvalActor
from a3c.backends.ray.evaluation import RemoteEvaluator
from a3c.backends.ray.stats import RunStats
from a3c.core.records import ErrorRecord, EvalRecord
from a3c.runtime.evaluator import next_wait
from a3c.runtime.state import SharedState

EVAL_JOIN_S = 10.0  # the evaluator thread gets this long to end once asked (its waits are all bounded)


class EvalLoop:
    """Starts the evaluation actor and the thread that evaluates with it; ``snapshot()`` returns (weights
    [params], global step, updates, statistics slots) of the global model."""

    def __init__(
        self, shared: SharedState, eval_seed: int, best_mean: float, snapshot: Callable[[], Any],
        placement: Any = None,
    ):  # fmt: skip
        config = self.config = shared.config
        # Retried by RemoteEvaluator itself (max_task_retries=0), so hangs and crashes share one budget.
        options = {"max_restarts": config.max_restarts, "max_task_retries": 0}
        if placement is not None:  # a Ray scheduling strategy
            options["scheduling_strategy"] = placement
        self.actor = EvalActor.options(**options).remote(config.to_dict(), shared.spaces)
        # The thread keeps its own twin of the observation statistics (the trainer's are the checkpoint's,
        # written in the main thread).
        twin = RunStats.empty(shared.spaces.obs_shape, config.workers, config.obs_norm, False).obs
        try:
            self.evaluator = RemoteEvaluator(
                dataclasses.replace(shared, obs_stats=twin),
                eval_seed,
                best_mean,
                snapshot=snapshot,
                actor=self.actor,
            )
        except BaseException:  # e.g. eval.csv that cannot be opened: the actor must not outlive the run
            ray.kill(self.actor, no_restart=True)
            raise
        self.records: queue.Queue[EvalRecord | ErrorRecord] = queue.Queue()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="a3c-ray-evaluator", daemon=True)
        self.thread.start()

    @property
    def restarts(self) -> int:
        """Evaluation actor restarts so far."""
        return self.evaluator.actor_restarts

    def _loop(self) -> None:
        try:
            while not self.stop_event.wait(self.config.eval_interval):
                cpu = self.evaluator.remote_cpu_s
                record = self.evaluator.evaluate(self.stop_event.is_set, only_if_moved=True)
                if record is not None:
                    self.records.put(record)
                used, trained = self.evaluator.remote_cpu_s - cpu, self.evaluator.start_time.elapsed()
                near = self.evaluator.near_target
                extra = next_wait(used, self.config, trained, near) - self.config.eval_interval
                if extra > 0 and self.stop_event.wait(extra):
                    return
        except ActorFailed as exc:
            self.records.put(exc.record())
        except Exception as exc:  # noqa: BLE001 - reported to the trainer as the evaluator's failure
            if not self.stop_event.is_set():  # at teardown, a call to a killed actor fails: not an error
                self.records.put(ErrorRecord("evaluator", f"{type(exc).__name__}: {exc}"))

    def take(self) -> list[Any]:
        """The evaluations (or the evaluator's failure) queued since the last take."""
        records = []
        while not self.records.empty():
            records.append(self.records.get())
        return records

    def stop(self, timeout: float = EVAL_JOIN_S) -> bool:
        """Ask the thread to end; whether it did within ``timeout`` s."""
        self.stop_event.set()
        self.thread.join(timeout=timeout)
        return not self.thread.is_alive()

    def final(self, should_stop: Callable[[], bool] = lambda: False) -> list[EvalRecord | ErrorRecord]:
        """One more evaluation at a budget's end (best.pt's candidates rescored), as the local evaluator
        does; ``should_stop()`` (a signal meanwhile) cuts it short. Only once the thread has ended, so the
        two never share the evaluator: if it has not, the final evaluation is skipped."""
        if not self.stop():
            print(
                f"warning: the evaluator thread did not stop within {EVAL_JOIN_S:g} s; "
                "the final evaluation is skipped",
                file=sys.stderr,
                flush=True,
            )
            return []
        try:
            record = self.evaluator.final(should_stop)
        except ActorFailed as exc:
            record = exc.record()
        return [] if record is None else [record]

    def close(self) -> None:
        """After the actors are killed (which ends any call the thread still waited on): join the thread,
        then close eval.csv."""
        self.thread.join(timeout=EVAL_JOIN_S)
        if self.thread.is_alive():
            print("warning: the evaluator thread did not end; eval.csv is left open", file=sys.stderr)
        else:
            self.evaluator.close()
