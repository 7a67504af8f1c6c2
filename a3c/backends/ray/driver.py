"""The Ray backend: the same A3C with the workers, the global model and the evaluator as Ray actors, on one
machine or a cluster (``a3c train --backend ray [--ray-address auto|HOST:PORT]``).

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

No wait is without a timeout (DESIGN invariant 7), and a hung actor is treated like a hung local child:
- a worker actor that sends the server nothing for ``hang_timeout`` s is killed and restarted by Ray (its
  loop too), within ``max_restarts``; past that the run fails naming it;
- the evaluator actor reports, on request, when its episodes last advanced; one silent for ``hang_timeout`` s
  (or not answering at all) is killed, restarted and asked again, within ``max_restarts``;
- a parameter server that does not answer within ``hang_timeout`` s fails the run (exit 1, an ErrorRecord
  naming it): it holds the state, so the driver keeps its last consistent copy (the last sync) rather than
  restarting it empty. An actor's first answer gets ``STARTUP_TIMEOUT_S`` (Ray starts a process, imports).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError
from torch import nn

from a3c.algo.flat import flat_view, flatten_parameters
from a3c.algo.greedy import play_greedy
from a3c.algo.learner import Learner, build_model, build_shared
from a3c.algo.metrics import MetricsWindow
from a3c.algo.optim import SharedOptimizer, non_finite_counts
from a3c.core.config import Config
from a3c.core.records import EpisodeRecord, ErrorRecord, EvalRecord, MetricsRecord
from a3c.core.spaces import Spaces
from a3c.run.resume import restore_model, restore_optimizer
from a3c.runtime.context import ONE_THREAD
from a3c.runtime.evaluator import Evaluator, next_wait
from a3c.runtime.shared import Counters
from envs import make_eval_vector_env

SYNC_AT_LEAST_S = 0.5  # a worker whose gradients are all skipped (non-finite) still reports this often
STARTUP_TIMEOUT_S = 120.0  # an actor's first answer waits for Ray to start its process and import torch
BEAT_S = 1.0  # how often the driver asks the evaluator actor whether its episodes still advance
CANCEL_GRACE_S = 5.0  # a cancelled evaluation gets this long to hand back its partial episodes
EVAL_JOIN_S = 10.0  # the evaluator thread gets this long to end once asked (its waits are all bounded)
# Fault injection for tests/test_ray.py only: an actor named by this environment variable blocks in one of
# its methods (see ``_injected_hang``). Nothing sets it outside the tests; unset, it costs one dict lookup.
HANG_VAR = "A3C_TEST_HANG"
HANG_S = 3600.0  # the injected hang; the driver must notice it and kill the actor long before
HANG_AFTER_UPDATES = 500  # the server's injected hang waits for these (seconds of training): a sync first


def _injected_hang(actor: str) -> None:
    """Block (a test's injected hang) when ``A3C_TEST_HANG`` names ``actor``, in its first incarnation only:
    the actor that Ray restarts in its place goes on."""
    if os.environ.get(HANG_VAR) == actor and not ray.get_runtime_context().was_current_actor_reconstructed:
        time.sleep(HANG_S)


def wait_limit(hang_timeout: float, starting: bool) -> float:
    """How long to wait for an actor: ``hang_timeout``, or at least STARTUP_TIMEOUT_S while it may still be
    starting (before its first answer, or its loop's first seconds)."""
    return max(hang_timeout, STARTUP_TIMEOUT_S) if starting else hang_timeout


class ActorFailed(RuntimeError):
    """An actor that hung or died beyond what a restart can mend: the run fails naming ``source``. (Not an
    OSError, as Ray's GetTimeoutError is: the trainer treats an OSError at a checkpoint as a full disk.)"""

    def __init__(self, source: str, message: str):
        super().__init__(message)
        self.source = source

    def record(self) -> ErrorRecord:
        return ErrorRecord(self.source, str(self))


class _Hung(Exception):
    """The evaluator actor was silent past its timeout and has been killed."""


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over ``array``; Ray hands arrays over read-only (zero-copy), so those are copied first."""
    return torch.from_numpy(np.require(array, requirements="W"))


@ray.remote
class ParameterServer:
    """The global model and optimizer; ``push`` applies one gradient and returns the new weights."""

    def __init__(
        self,
        config: dict[str, Any],
        spaces: Spaces,
        model_state: dict[str, torch.Tensor],
        optimizer_state: dict[str, Any],
        base: list[int],
    ):
        torch.set_num_threads(1)
        cfg = Config.from_dict(config)
        self.model, self.optimizer = build_shared(cfg, spaces)
        restore_model(self.model, model_state, "the driver's model")
        restore_optimizer(self.optimizer, optimizer_state, "the driver's optimizer")
        self.flat = self.optimizer.param_groups[0]["params"][0]
        self.slots = np.zeros((3, cfg.workers), np.int64)  # steps, updates, skipped of each worker
        self.base = np.asarray(base, np.int64)
        self.registrations = np.zeros(cfg.workers, np.int64)
        self.contact = np.full(cfg.workers, -np.inf)  # time.monotonic() of each worker's last call: its beat
        self.records: list[Any] = []
        self.stopped = False

    def register(self, worker: int) -> int:
        """How many times ``worker`` started before: its restart index (a fresh seed stream each time)."""
        self.registrations[worker] += 1
        self.contact[worker] = time.monotonic()
        return int(self.registrations[worker] - 1)

    def push(
        self, worker: int, grad: np.ndarray | None, steps: int, updates: int, skipped: int, records: list
    ) -> tuple[np.ndarray, int, int, bool]:
        """Apply ``grad`` (if any), count, keep the records; return (weights, global step, updates, stop)."""
        if grad is not None:
            self.flat.grad = _tensor(grad)
            self.optimizer.step()
        self.slots[:, worker] += (steps, updates, skipped)
        self.contact[worker] = time.monotonic()
        self.records.extend(records)
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1]), self.stopped

    def snapshot(self) -> tuple[np.ndarray, int, int]:
        """(weights, global step, updates) read together."""
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1])

    def drain(self) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
        """The records since the last drain, the per-worker counter slots [3, workers], the seconds since
        each worker last called [workers] (inf: never; ages, not times, as the driver's clock may differ) and
        how often each worker registered [workers] (a restarted one registers again)."""
        if self.slots[1].sum() >= HANG_AFTER_UPDATES:
            _injected_hang("server")  # tests: a server that hangs once training is under way
        records, self.records = self.records, []
        return records, self.slots.copy(), time.monotonic() - self.contact, self.registrations.copy()

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} for the parameters that have any (empty: all finite), counted on
        a copy (``a3c.algo.optim.non_finite_counts``), so the driver's check moves a verdict, not the
        state."""
        return {name: count for name, count in non_finite_counts(self.model).items() if count}

    def state(self) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """(weights, optimizer state tensors, counter slots), for the driver's checkpoint."""
        optimizer = {k: v.numpy().copy() for k, v in self.optimizer.state[self.flat].items()}
        return self.flat.numpy().copy(), optimizer, self.slots.copy()

    def stop(self) -> None:
        self.stopped = True


class GradientLink:
    """A Ray worker's stand-in for the shared optimizer. ``Learner`` hands it each gradient as the ``.grad``
    of the local flat weights and calls ``step()``; the link sums them until the worker sends their mean."""

    def __init__(self, flat: torch.Tensor, lr: float, sync_every: int):
        self.param_groups = [{"params": [flat], "lr": lr}]
        self.flat = flat
        self.sync_every = sync_every
        self.total = torch.zeros_like(flat)
        self.count = 0

    def step(self) -> None:
        self.total += self.flat.grad
        self.count += 1

    def due(self) -> bool:
        return self.count >= self.sync_every

    def take(self) -> np.ndarray | None:
        """The mean of the gradients since the last take (None if there were none); starts a new sum."""
        mean = None if self.count == 0 else (self.total / self.count).numpy()  # a new tensor: safe to zero
        self.total.zero_()
        self.count = 0
        return mean

    def load(self, weights: np.ndarray) -> None:
        with torch.no_grad():
            self.flat.copy_(_tensor(weights))


@ray.remote(num_cpus=1)
class RayWorker:
    """One A3C worker: the local backend's Learner; gradients to the server, weights back."""

    def __init__(
        self,
        worker: int,
        config: dict[str, Any],
        spaces: Spaces,
        server: Any,
        seed: int,
        resume_index: int,
        start_time: float,
    ):
        from a3c.core.seeding import child_seed

        torch.set_num_threads(1)
        self.cfg = cfg = Config.from_dict(config)
        self.worker, self.server, self.start_time = worker, server, start_time
        # The server may still be starting; later, a server that stays silent fails the run at the driver
        # first (after hang_timeout), so the worker's own waits are bounded more loosely.
        self.timeout = 2 * max(cfg.hang_timeout, STARTUP_TIMEOUT_S)
        restart = ray.get(server.register.remote(worker), timeout=self.timeout)
        weights, self.global_step, self.updates_seen = ray.get(server.snapshot.remote(), timeout=self.timeout)
        model = build_model(cfg, spaces)
        self.link = GradientLink(flatten_parameters(model), cfg.lr, cfg.sync_every)
        self.link.load(weights)
        self.learner = Learner(
            cfg, model, self.link, child_seed(seed, worker, restart, resume_index), lambda: self.updates_seen
        )
        self.window = MetricsWindow(worker)

    def run(self) -> str:
        """Update until the server says stop; returns "stopped"."""
        steps = updates = skipped = 0
        records: list[EpisodeRecord | MetricsRecord] = []
        last_sync = time.monotonic()
        while True:
            result = self.learner.update()
            finite = bool(np.isfinite(result.grad_norm))
            steps, updates, skipped = steps + result.steps, updates + 1, skipped + (not finite)
            self.window.add(result)
            wall = round(time.time() - self.start_time, 3)
            step = self.global_step + steps
            records += [
                EpisodeRecord(wall, step, self.worker, e.episode_return, e.length) for e in result.episodes
            ]
            if self.window.due():
                records.append(self.window.record(wall, step, self.cfg.lr))
            if self.link.due() or time.monotonic() - last_sync >= SYNC_AT_LEAST_S:
                reply = self.server.push.remote(
                    self.worker, self.link.take(), steps, updates, skipped, records
                )
                weights, self.global_step, updates_now, stop = ray.get(
                    reply, timeout=2 * self.cfg.hang_timeout
                )
                # Policy lag: the updates of other workers between this worker's weights and its gradient.
                lag = max(updates_now - self.updates_seen - updates, 0)
                self.window.lags[-updates:] = [lag] * min(updates, len(self.window.lags))
                self.updates_seen = updates_now
                self.link.load(weights)
                steps = updates = skipped = 0
                records, last_sync = [], time.monotonic()
                if stop:
                    return "stopped"


@ray.remote(num_cpus=0, max_concurrency=2)  # two threads: ``beat`` and ``cancel`` answer during ``play``
class EvalActor:
    """Plays greedy episodes of given weights; says when they last advanced (its heartbeat) and stops them
    early on request."""

    def __init__(self, config: dict[str, Any], spaces: Spaces):
        torch.set_num_threads(1)
        self.cfg = Config.from_dict(config)
        self.model = build_model(self.cfg, spaces)
        self.flat = flatten_parameters(self.model)
        self.envs: dict[int, Any] = {}
        self.last_step: float | None = None  # time.monotonic() of the running play's last step (None: idle)
        self.cancelled = 0  # the play id to cut short

    def play(
        self, weights: np.ndarray, episodes: int, seed: int, play_id: int
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """(returns [episodes], lengths [episodes], CPU seconds used); partial if ``cancel(play_id)``."""
        self.last_step = time.monotonic()
        try:
            _injected_hang("evaluator")  # tests: the first evaluator actor hangs, its restart does not
            cpu = time.process_time()
            with torch.no_grad():
                self.flat.copy_(_tensor(weights))
            if episodes not in self.envs:
                self.envs[episodes] = make_eval_vector_env(self.cfg.env_id, episodes)

            def stepped() -> bool:  # called by play_greedy before every step
                self.last_step = time.monotonic()
                return self.cancelled == play_id

            returns, lengths = play_greedy(self.model, self.envs[episodes], seed, stepped, self.cfg.squash)
            return returns, lengths, time.process_time() - cpu
        finally:
            self.last_step = None

    def beat(self) -> float | None:
        """Seconds since the running play last stepped (None when none runs)."""
        last = self.last_step
        return None if last is None else time.monotonic() - last

    def cancel(self, play_id: int) -> None:
        self.cancelled = play_id


class RemoteEvaluator(Evaluator):
    """The driver's evaluator: eval.csv and best.pt here; the weights from the server; the episodes played
    by the ``EvalActor``."""

    def __init__(self, *args: Any, ask_server: Any, actor: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ask_server, self.actor = ask_server, actor
        self.remote_cpu_s = 0.0
        self.actor_restarts = 0
        self.actor_answered = False  # since its last (re)start: until then the start-up timeout applies
        self.restarted_at = time.monotonic()
        self.play_id = 0

    def _pull(self) -> tuple[int, int]:
        weights, global_step, updates = self.ask_server("snapshot")
        with torch.no_grad():
            self.flat.copy_(_tensor(weights))
        return global_step, updates

    def _play(self, episodes: int, should_stop) -> tuple[np.ndarray, np.ndarray]:
        """Play on the actor; a hung or dead actor is killed and restarted (by Ray) and asked again, within
        ``max_restarts``; past that ``ActorFailed``. When stopping, a play that does not end is abandoned."""
        seed = int(self.rng.integers(2**31 - 1 - episodes))
        while True:
            self.play_id += 1
            ref = self.actor.play.remote(self.flat.numpy(), episodes, seed, self.play_id)
            try:
                result = self._await(ref, should_stop)
            except _Hung as exc:
                problem = str(exc)
            except ActorUnavailableError as exc:
                if self.actor_answered:  # it was up: this is a crash
                    problem = f"died ({type(exc).__name__})"
                elif should_stop():
                    return np.zeros(episodes), np.zeros(episodes, np.int64)
                elif time.monotonic() - self.restarted_at < STARTUP_TIMEOUT_S:
                    time.sleep(
                        BEAT_S
                    )  # Ray is still (re)starting it: ask again at this pace, under a deadline
                    continue
                else:
                    problem = f"did not come back within {STARTUP_TIMEOUT_S:g} s of its restart"
            except RayActorError as exc:
                problem = f"died ({type(exc).__name__})"
            else:
                if result is None:  # stopping, and the actor did not hand back its partial episodes
                    return np.zeros(episodes), np.zeros(episodes, np.int64)
                returns, lengths, cpu = result
                self.remote_cpu_s += cpu
                return returns, lengths
            self.actor_restarts += 1
            self.actor_answered = False
            self.restarted_at = time.monotonic()
            budget = self.config.max_restarts
            if self.actor_restarts > budget:
                raise ActorFailed(
                    "evaluator actor", f"the evaluator actor {problem}; past its restart budget"
                )
            print(
                f"warning: the evaluator actor {problem}; restarting it ({self.actor_restarts}/{budget})",
                file=sys.stderr,
                flush=True,
            )

    def _await(self, ref: Any, should_stop) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The result of the play ``ref``, asking the actor for its beat every ``BEAT_S``; kills it (raising
        ``_Hung``) once it is silent for longer than its timeout; None if stopping cut the wait short."""
        alive_at = time.monotonic()  # the last sign that its episodes advanced
        beat, beat_sent, cancelled_at = None, 0.0, None
        while True:
            limit = wait_limit(self.config.hang_timeout, starting=not self.actor_answered)
            done, _ = ray.wait([ref], timeout=BEAT_S)
            now = time.monotonic()
            if done:
                result = ray.get(ref, timeout=limit)  # ready: no wait
                self.actor_answered = True
                return result
            if should_stop():
                if cancelled_at is None:
                    self.actor.cancel.remote(self.play_id)
                    cancelled_at = now
                elif now - cancelled_at > CANCEL_GRACE_S:
                    return None
                continue
            if beat is not None and ray.wait([beat], timeout=0)[0]:
                age = ray.get(beat, timeout=limit)  # ready: no wait
                self.actor_answered = True
                alive_at = max(alive_at, beat_sent - (age or 0.0))
                beat = None
            if beat is None:
                beat, beat_sent = self.actor.beat.remote(), now
            if now - alive_at > limit:
                ray.kill(self.actor, no_restart=False)  # Ray starts a new one (max_restarts)
                raise _Hung(f"hung (its episodes made no progress for {now - alive_at:.0f} s) and was killed")

    def _cpu_s(self) -> float:
        return self.remote_cpu_s


class RayRun:
    """The driver's side of a Ray run: starts the actors, relays their records, restarts worker loops,
    evaluates in a background thread and mirrors the server's state into the trainer's objects."""

    def __init__(
        self,
        config: Config,
        spaces: Spaces,
        model: nn.Module,
        optimizer: SharedOptimizer,
        counters: Counters,
        run_dir: Path,
        start_time: float,
        seeds: tuple[int, int],
        resume_index: int,
        best_mean: float,
    ):
        self.config, self.model, self.optimizer, self.counters = config, model, optimizer, counters
        self.started_cluster = not ray.is_initialized()
        if self.started_cluster:
            ray.init(
                address=config.ray_address,
                num_cpus=None if config.ray_address else max(config.workers, os.cpu_count() or 1),
                namespace=f"a3c-{uuid.uuid4().hex[:8]}",
                include_dashboard=False,
                configure_logging=False,
                log_to_driver=True,
                runtime_env={"env_vars": ONE_THREAD},  # one BLAS/OpenMP thread per actor (a3c/context.py)
            )
        config_dict = config.to_dict()
        dims = (spaces,)
        base = [int(v) for v in counters.base.tolist()]
        self.server = ParameterServer.options(num_cpus=0).remote(
            config_dict, *dims, model.state_dict(), optimizer.state_dict(), base
        )
        self.server_answered = False  # until its first answer, the start-up timeout applies
        self.server_down = False  # hung or dead: never waited on again
        # The counter slots of the last sync: consistent with the weights the trainer holds, so they are what
        # the final checkpoint saves if the server is lost.
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
        # Crashed workers whose new incarnation has not registered yet (their registrations at the crash):
        # a loop started meanwhile may fail as "unavailable", which is not another crash.
        self.coming_back: dict[int, int] = {}
        self.started_early: set[int] = set()  # workers whose current loop was started while coming back
        self.worker_restarts = [0] * config.workers
        # Retried by RemoteEvaluator itself (max_task_retries=0), so hangs and crashes share one budget.
        self.eval_actor = actor = EvalActor.options(
            max_restarts=config.max_restarts, max_task_retries=0
        ).remote(config_dict, *dims)
        self.evaluator = RemoteEvaluator(
            config,
            model,
            counters,
            run_dir,
            eval_seed,
            start_time,
            *dims,
            best_mean,
            ask_server=self._ask_server,
            actor=actor,
        )
        self.eval_records: queue.Queue[EvalRecord | ErrorRecord] = queue.Queue()
        self.eval_stop = threading.Event()
        self.eval_thread = threading.Thread(target=self._evaluate_loop, name="a3c-ray-evaluator", daemon=True)
        self.eval_thread.start()

    @property
    def restarts(self) -> int:
        """Worker and evaluator actor restarts so far."""
        return sum(self.worker_restarts) + self.evaluator.actor_restarts

    def _ask_server(self, method: str, *args: Any) -> Any:
        """Call a server method and wait for its answer, at most ``hang_timeout`` s (the start-up timeout for
        its first); a server that does not answer (or died) is down for good: ``ActorFailed``."""
        if self.server_down:
            raise ActorFailed("parameter server", "the parameter server is down (see the first error)")
        timeout = wait_limit(self.config.hang_timeout, starting=not self.server_answered)
        try:
            result = ray.get(getattr(self.server, method).remote(*args), timeout=timeout)
        except GetTimeoutError:
            self.server_down = True
            raise ActorFailed(
                "parameter server",
                f"the parameter server did not answer {method}() within {timeout:g} s (hung); the run stops "
                "and checkpoints/last.pt keeps the state of the last checkpoint",
            ) from None
        except RayActorError as exc:
            self.server_down = True
            raise ActorFailed(
                "parameter server",
                f"the parameter server died ({type(exc).__name__}); checkpoints/last.pt keeps the state of "
                "the last checkpoint",
            ) from None
        self.server_answered = True
        return result

    def _evaluate_loop(self) -> None:
        try:
            while not self.eval_stop.wait(self.config.eval_interval):
                cpu = self.evaluator.remote_cpu_s
                record = self.evaluator.evaluate(self.eval_stop.is_set)
                if record is not None:
                    self.eval_records.put(record)
                extra = next_wait(self.evaluator.remote_cpu_s - cpu, self.config) - self.config.eval_interval
                if extra > 0 and self.eval_stop.wait(extra):
                    return
        except ActorFailed as exc:
            self.eval_records.put(exc.record())
        except Exception as exc:  # noqa: BLE001 - reported to the trainer as the evaluator's failure
            if not self.eval_stop.is_set():  # at teardown, a call to a killed actor fails: not an error
                self.eval_records.put(ErrorRecord("evaluator", f"{type(exc).__name__}: {exc}"))

    def poll(self, timeout: float) -> list[Any]:
        """Wait up to ``timeout`` s; return the records since the last poll (episodes, metrics, evaluations,
        errors) and update the counters mirror. A worker loop that ended by a crash (its actor died and was
        restarted by Ray, or ``run`` raised) is started again, up to ``max_restarts`` per worker; a worker
        silent for ``hang_timeout`` s is killed first (then restarted the same way)."""
        if self.loops:
            ray.wait(list(self.loops.values()), num_returns=1, timeout=timeout)
        else:
            self.eval_stop.wait(timeout)  # no loop left (the run is failing): just pace the trainer's loop
        try:
            records, slots, ages, registrations = self._ask_server("drain")
        except ActorFailed as exc:
            return [exc.record(), *self._eval_records()]
        self._mirror_counters(slots)
        for i, before in list(self.coming_back.items()):
            if registrations[i] > before:
                del self.coming_back[i]  # its new incarnation has registered
        self._kill_hung_workers(ages)
        for i, ref in list(self.loops.items()):
            done, _ = ray.wait([ref], timeout=0)
            if not done:
                continue
            try:
                ray.get(ref, timeout=self.config.hang_timeout)  # ready: no wait
                del self.loops[i]  # stopped on request
            except (RayActorError, RayTaskError) as exc:
                starting = time.monotonic() - self.loop_started[i] < STARTUP_TIMEOUT_S
                if isinstance(exc, ActorUnavailableError) and i in self.started_early and starting:
                    self._start_loop(i)  # Ray was still restarting it: ask again
                    continue
                self.worker_restarts[i] += 1
                self.coming_back[i] = int(registrations[i])
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
                    self._start_loop(i)
                    self.loop_started[i] = time.monotonic()
        return [*records, *self._eval_records()]

    def _start_loop(self, i: int) -> None:
        self.loops[i] = self.workers[i].run.remote()
        if i in self.coming_back:
            self.started_early.add(i)
        else:
            self.started_early.discard(i)

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

    def _eval_records(self) -> list[Any]:
        records = []
        while not self.eval_records.empty():
            records.append(self.eval_records.get())
        return records

    def _mirror_counters(self, slots: np.ndarray) -> None:
        for name, row in zip(("steps", "updates", "skipped"), slots, strict=True):
            getattr(self.counters, name)[:] = _tensor(row)

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} of the server's weights, nonzero ones only; computed on the
        server, so the finite check moves no weights."""
        return self._ask_server("non_finite_counts")

    def sync(self) -> None:
        """Copy the server's weights, optimizer state and counters into the trainer's objects, in place."""
        weights, optimizer, slots = self._ask_server("state")
        flat = self.optimizer.param_groups[0]["params"][0]
        with torch.no_grad():
            flat_view(self.model).copy_(_tensor(weights))
            for key, value in self.optimizer.state[flat].items():
                value.copy_(_tensor(np.asarray(optimizer[key])))
        self._mirror_counters(slots)
        self.synced_slots = slots

    def _stop_evaluator(self, timeout: float = EVAL_JOIN_S) -> bool:
        """Ask the evaluator thread to end; whether it did within ``timeout`` s."""
        self.eval_stop.set()
        self.eval_thread.join(timeout=timeout)
        return not self.eval_thread.is_alive()

    def final_evaluation(self) -> EvalRecord | ErrorRecord | None:
        """One more evaluation at a budget's end, as the local evaluator does. Only once the evaluator thread
        has ended, so the two never share the evaluator: if it has not, the final evaluation is skipped."""
        if not self._stop_evaluator():
            print(
                f"warning: the evaluator thread did not stop within {EVAL_JOIN_S:g} s; "
                "the final evaluation is skipped",
                file=sys.stderr,
                flush=True,
            )
            return None
        try:
            return self.evaluator.evaluate()
        except ActorFailed as exc:
            return exc.record()

    def stop(self, timeout: float = 10.0) -> list[Any]:
        """Stop the workers (each finishes its update and sends its last records) and the evaluator thread;
        sync; tear down the actors. Returns the records that arrived since the last poll. With the server
        down, the counters mirror goes back to the last sync, so the trainer's state stays one instant."""
        records: list[Any] = []
        try:
            self._stop_evaluator()
            if not self.server_down:
                try:
                    self._ask_server("stop")
                    if self.loops:
                        ray.wait(list(self.loops.values()), num_returns=len(self.loops), timeout=timeout)
                    records = self._ask_server("drain")[0]
                    self.sync()
                except ActorFailed as exc:
                    records.append(exc.record())
            if self.server_down:
                self._mirror_counters(self.synced_slots)
        finally:
            for actor in [*self.workers, self.eval_actor, self.server]:
                ray.kill(actor, no_restart=True)
            # The kills end any call the evaluator thread still waited on; it must end before its files close.
            self.eval_thread.join(timeout=EVAL_JOIN_S)
            if self.eval_thread.is_alive():
                print("warning: the evaluator thread did not end; eval.csv is left open", file=sys.stderr)
            else:
                self.evaluator.close()
            if self.started_cluster:
                ray.shutdown()
        return [*records, *self._eval_records()]
