"""The Ray backend: the same A3C with the workers, the global model and the evaluator as Ray actors, on one
machine or a cluster (``a3c train --backend ray [--ray-address auto|HOST:PORT]``). The module is
too long because RayRun is (see its docstring); the design notes below cover the whole package.

- ``ParameterServer`` holds the global model (one flat buffer) and the shared optimizer's state and applies
  each gradient as it arrives, in arrival order: asynchronous and without a barrier, as in A3C (Hogwild's
  lock-free races become a queue). It keeps the exact per-worker counters and buffers the workers' records
  until the driver collects them.
- ``RayWorker`` runs the local backend's very ``Learner`` against a local copy of the global weights. Its
  "optimizer", ``GradientLink``, collects ``sync_every`` gradients, sends their mean to the server and takes
  the new weights back: 1 is A3C exactly; more trades staler weights for fewer round trips.
- ``EvalActor`` plays the greedy episodes; the driver keeps eval.csv and best.pt, since files live where the
  driver runs, whichever node an actor lands on.
- ``RayRun`` is the driver's side, used by ``Trainer``: before every checkpoint it copies the server's state
  into the trainer's model, optimizer and counters, so checkpoints are the local backend's and a run resumes
  on either backend.

A worker actor that dies is restarted by Ray (up to ``max_restarts``) and its loop is started again; the
server itself is not restarted (its state is in the last checkpoint: ``--resume``).

No wait is without a timeout (invariant 7), and a hung actor is treated like a hung local child:
- a worker actor that sends the server nothing for ``hang_timeout`` s is killed and restarted by Ray (its
  loop too), within ``max_restarts``; past that the run fails naming it;
- the evaluator actor reports, on request, when its episodes last advanced; one silent for ``hang_timeout`` s
  (or not answering at all) is killed, restarted and asked again, within ``max_restarts``;
- a parameter server that does not answer within ``hang_timeout`` s fails the run (exit 1, an ErrorRecord
  naming it): it holds the state, so the driver keeps its last consistent copy (the last sync) rather than
  restarting it empty. An actor's first answer gets ``STARTUP_TIMEOUT_S`` (Ray starts a process, imports).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from a3c.algo.shared.flat import flat_view
from a3c.backends.ray.actors import (
    STARTUP_TIMEOUT_S,
    ActorFailed,
    ParameterServer,
    RayWorker,
    wait_limit,
    writable_tensor,
)
from a3c.backends.ray.cluster import Rechecks, connect
from a3c.backends.ray.eval_loop import EvalLoop
from a3c.backends.ray.stats import RunStats
from a3c.core.records import ErrorRecord, EvalRecord
from a3c.runtime.state import SharedState


class RayRun:
    """The driver's side of a Ray run (the ``ray`` Backend): starts the actors, relays their records,
    restarts worker loops, evaluates in a background thread and mirrors the server's state into the
    trainer's objects.

    It is too long because every wait on an actor carries its own liveness decision (start-up allowance,
    hang timeout, restart budget, a restarted actor not up yet) and those decisions share one state; split
    apart they would hand that state back and forth. The actors and the remote evaluator are their own
    modules (actors.py, evaluation.py)."""

    def __init__(self, shared: SharedState, seeds: tuple[int, int], resume_index: int, best_mean: float):
        config, spaces, start_time = shared.config, shared.spaces, shared.start_time
        model, optimizer, counters = shared.model, shared.optimizer, shared.counters
        self.config, self.model, self.optimizer, self.counters = config, model, optimizer, counters
        self.run_dir = shared.run_dir
        self.ray_cluster = connect(config)  # started or joined, judged by its rule before anything runs on it
        try:
            config_dict = config.to_dict()
            dims = (spaces,)
            base = [int(v) for v in counters.base.tolist()]
            # The trainer's statistics (slot 0: a resumed checkpoint's) seed the server's; ``sync`` copies the
            # server's back before each checkpoint.
            self.stats = RunStats(shared.obs_stats, shared.reward_stats)
            self.server = ParameterServer.options(num_cpus=0).remote(
                config_dict, *dims, model.state_dict(), optimizer.state_dict(), base, self.stats.arrays()
            )
            self.server_answered = False  # until its first answer, the start-up timeout applies
            self.rechecks = Rechecks(self.ray_cluster)
            self.server_down = False  # hung or dead: never waited on again
            self.server_failure = ""  # why it is down: every later call says it again
            # The counter slots of the last sync: consistent with the weights the trainer holds, so they are
            # what the final checkpoint saves if the server is lost.
            self.synced_slots = np.zeros((3, config.workers), np.int64)
            worker_seed, eval_seed = seeds
            self.workers = [
                RayWorker.options(max_restarts=config.max_restarts, max_task_retries=0).remote(
                    i, config_dict, *dims, self.server, worker_seed, resume_index, start_time
                )
                for i in range(config.workers)
            ]
            self.loops = {i: w.run.remote() for i, w in enumerate(self.workers)}
            now = time.monotonic()
            self.loop_started = [now] * config.workers  # the start-up timeout applies until STARTUP_TIMEOUT_S
            self.hung: dict[int, str] = {}  # workers killed as hung, why (for their crash report)
            # Each worker's update count on the server when its current loop was sent: a loop sent after a
            # crash that fails as "unavailable" before it pushed once never ran (Ray was still restarting
            # the actor, or this client still held the dead incarnation's address): sent again, not counted.
            self.updates_at_send = np.zeros(config.workers, np.int64)
            self.worker_restarts = [0] * config.workers
            self.eval_loop = EvalLoop(shared, eval_seed, best_mean, self._ask_server)
        except BaseException:  # a failed start must not leave actors (or the cluster it started) behind
            self._tear_down()
            raise

    def _tear_down(self) -> None:
        """Kill every actor started so far; shut down a cluster this run started."""
        actors = [
            *getattr(self, "workers", []),
            getattr(getattr(self, "eval_loop", None), "actor", None),
            getattr(self, "server", None),
        ]
        for actor in actors:
            if actor is not None:
                ray.kill(actor, no_restart=True)
        if self.ray_cluster.connected_by_run:
            ray.shutdown()

    @property
    def restarts(self) -> int:
        """Worker and evaluator actor restarts so far."""
        return sum(self.worker_restarts) + self.eval_loop.restarts

    def _ask_server(self, method: str, *args: Any) -> Any:
        """Call a server method and wait for its answer, at most ``hang_timeout`` s (the start-up timeout for
        its first); a server that does not answer (or died) is down for good: ``ActorFailed``."""
        if self.server_down:
            # The trainer and the evaluator thread both ask: the one that fails second must say the same.
            raise ActorFailed("parameter server", self.server_failure)
        # tests: a server whose hang a test injects blocks once a checkpoint holds updates (actors.py)
        hanging = "server" if self.synced_slots[1].any() else ""
        timeout = wait_limit(self.config.hang_timeout, starting=not self.server_answered, hanging=hanging)
        try:
            result = ray.get(getattr(self.server, method).remote(*args), timeout=timeout)
        except (GetTimeoutError, RayActorError) as exc:
            what = f"died ({type(exc).__name__})"
            if isinstance(exc, GetTimeoutError):
                what = f"did not answer {method}() within {timeout:g} s (hung)"
            self.server_failure = (
                f"the parameter server {what}; the run stops and checkpoints/last.pt keeps the state of the "
                f"last checkpoint: continue with `a3c train --resume {self.run_dir}`"
            )
            self.server_down = True
            raise ActorFailed("parameter server", self.server_failure) from None
        self.server_answered = True
        return result

    def poll(self, timeout: float) -> list[Any]:
        """Wait up to ``timeout`` s; return the records since the last poll (episodes, metrics, evaluations,
        errors) and update the counters mirror. A worker loop that ended by a crash (its actor died and was
        restarted by Ray, or ``run`` raised) is started again, up to ``max_restarts`` per worker; a worker
        silent for ``hang_timeout`` s is killed first (then restarted the same way)."""
        if self.loops:
            ray.wait(list(self.loops.values()), num_returns=1, timeout=timeout)
        else:
            self.eval_loop.stop_event.wait(
                timeout
            )  # no loop left (the run is failing): just pace the trainer's loop
        try:
            records, slots, ages = self._ask_server("drain")
        except ActorFailed as exc:
            return [exc.record(), *self.eval_loop.take()]
        self._mirror_counters(slots)
        self.rechecks.after_drain(slots[1], self.restarts)  # BackendFailed stops the run
        self._kill_hung_workers(ages)
        for i, ref in list(self.loops.items()):
            done, _ = ray.wait([ref], timeout=0)
            if not done:
                continue
            try:
                records += ray.get(ref, timeout=self.config.hang_timeout)  # ready: no wait; its last records
                del self.loops[i]  # stopped on request
            except (RayActorError, RayTaskError) as exc:
                starting = time.monotonic() - self.loop_started[i] < STARTUP_TIMEOUT_S
                # Sent after a counted crash, and no push since: Ray is still restarting the actor.
                restarting = self.worker_restarts[i] > 0 and slots[1, i] == self.updates_at_send[i]
                if isinstance(exc, ActorUnavailableError) and restarting and starting and i not in self.hung:
                    self._start_loop(i, slots)  # not up yet: ask again
                    continue
                self.worker_restarts[i] += 1
                why = self.hung.pop(i, None)
                if self.worker_restarts[i] > self.config.max_restarts:
                    detail = why or str(exc)[-2500:]
                    records.append(ErrorRecord(f"worker {i}", f"{detail}\n(past its restart budget)"))
                    del self.loops[i]
                else:
                    what = why or f"crashed ({type(exc).__name__})"
                    print(
                        f"warning: worker {i} {what}; restarting its loop "
                        f"({self.worker_restarts[i]}/{self.config.max_restarts})",
                        file=sys.stderr,
                        flush=True,
                    )
                    self._start_loop(i, slots)
                    self.loop_started[i] = time.monotonic()
        return [*records, *self.eval_loop.take()]

    def _last_records(self) -> list[Any]:
        """The records each stopped worker loop returned (its last metrics); loops still running give none."""
        records: list[Any] = []
        for ref in self.loops.values():
            try:
                records += ray.get(ref, timeout=0)
            except (GetTimeoutError, RayActorError, RayTaskError):
                continue  # still running or failed: its last window is lost, as a crashed process's is
        return records

    def _start_loop(self, i: int, slots: np.ndarray) -> None:
        """Send worker ``i``'s loop again; ``slots`` [3, workers]: the server's counters just drained."""
        self.loops[i] = self.workers[i].run.remote()
        self.updates_at_send[i] = slots[1, i]

    def _kill_hung_workers(self, ages: np.ndarray) -> None:
        """Kill (for Ray to restart) each running worker that has not called the server for ``hang_timeout``
        s, once past its start-up time; ``poll`` then sees its loop fail and restarts it within budget."""
        now = time.monotonic()
        for i in self.loops:
            if i in self.hung or now - self.loop_started[i] < wait_limit(self.config.hang_timeout, True):
                continue
            if ages[i] > self.config.hang_timeout:
                self.hung[i] = (
                    f"sent nothing to the parameter server for {ages[i]:.0f} s (hung) and was killed"
                )
                ray.kill(self.workers[i], no_restart=False)

    def _mirror_counters(self, slots: np.ndarray) -> None:
        for name, row in zip(("steps", "updates", "skipped"), slots, strict=True):
            getattr(self.counters, name)[:] = writable_tensor(row)

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} of the server's weights, nonzero ones only; computed on the
        server, so the finite check moves no weights."""
        return self._ask_server("non_finite_counts")

    def sync(self) -> None:
        """Copy the server's weights, optimizer state and counters into the trainer's objects, in place."""
        weights, optimizer, slots, stats = self._ask_server("state")
        flat = self.optimizer.param_groups[0]["params"][0]
        with torch.no_grad():
            flat_view(self.model).copy_(writable_tensor(weights))
            for key, value in self.optimizer.state[flat].items():
                value.copy_(writable_tensor(np.asarray(optimizer[key])))
        self._mirror_counters(slots)
        self.stats.load(stats)
        self.synced_slots = slots

    def final_evaluation(self) -> list[EvalRecord | ErrorRecord]:
        """One more evaluation at a budget's end (``EvalLoop.final``)."""
        return self.eval_loop.final()

    def stop(self, cut_short: Callable[[], bool] = lambda: False, timeout: float = 10.0) -> list[Any]:
        """(Every wait here is bounded by ``timeout`` or EVAL_JOIN_S, so ``cut_short`` is not needed.)
        Stop the workers (each finishes its update and sends its last records) and the evaluator thread;
        sync; tear down the actors. Returns the records that arrived since the last poll. With the server
        down, the counters mirror goes back to the last sync, so the trainer's state stays one instant."""
        records: list[Any] = []
        try:
            self.eval_loop.stop()
            if not self.server_down:
                try:
                    self._ask_server("stop")
                    if self.loops:
                        ray.wait(list(self.loops.values()), num_returns=len(self.loops), timeout=timeout)
                    records = self._ask_server("drain")[0] + self._last_records()
                    self.sync()
                except ActorFailed as exc:
                    records.append(exc.record())
            if self.server_down:
                self._mirror_counters(self.synced_slots)
        finally:
            try:
                for actor in [*self.workers, self.eval_loop.actor, self.server]:
                    try:
                        ray.kill(actor, no_restart=True)
                    except Exception as exc:  # noqa: BLE001 - one failed kill must not keep the rest alive
                        print(f"warning: could not kill a Ray actor: {exc}", file=sys.stderr, flush=True)
                self.eval_loop.close()
            finally:
                if self.ray_cluster.connected_by_run:
                    ray.shutdown()  # a cluster this run started stops with it, whatever failed above
        return [*records, *self.eval_loop.take()]
