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
"""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import RayActorError, RayTaskError
from torch import nn

from a3c.config import Config
from a3c.context import ONE_THREAD
from a3c.evaluator import Evaluator, next_wait, play_greedy
from a3c.flat import flat_view, flatten_parameters
from a3c.learner import Learner, build_model, build_shared
from a3c.metrics import MetricsWindow
from a3c.records import EpisodeRecord, ErrorRecord, EvalRecord, MetricsRecord
from a3c.resume import restore_model, restore_optimizer
from a3c.shared import Counters, SharedOptimizer
from envs import Spaces, make_eval_vector_env

SYNC_AT_LEAST_S = 0.5  # a worker whose gradients are all skipped (non-finite) still reports this often


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
        self.records: list[Any] = []
        self.stopped = False

    def register(self, worker: int) -> int:
        """How many times ``worker`` started before: its restart index (a fresh seed stream each time)."""
        self.registrations[worker] += 1
        return int(self.registrations[worker] - 1)

    def push(
        self, worker: int, grad: np.ndarray | None, steps: int, updates: int, skipped: int, records: list
    ) -> tuple[np.ndarray, int, int, bool]:
        """Apply ``grad`` (if any), count, keep the records; return (weights, global step, updates, stop)."""
        if grad is not None:
            self.flat.grad = _tensor(grad)
            self.optimizer.step()
        self.slots[:, worker] += (steps, updates, skipped)
        self.records.extend(records)
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1]), self.stopped

    def snapshot(self) -> tuple[np.ndarray, int, int]:
        """(weights, global step, updates) read together."""
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1])

    def drain(self) -> tuple[list, np.ndarray]:
        """The records since the last drain, and the per-worker counter slots."""
        records, self.records = self.records, []
        return records, self.slots.copy()

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
        from a3c.trainer import child_seed

        torch.set_num_threads(1)
        self.cfg = cfg = Config.from_dict(config)
        self.worker, self.server, self.start_time = worker, server, start_time
        restart = ray.get(server.register.remote(worker))
        weights, self.global_step, self.updates_seen = ray.get(server.snapshot.remote())
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
                weights, self.global_step, updates_now, stop = ray.get(reply)
                # Policy lag: the updates of other workers between this worker's weights and its gradient.
                lag = max(updates_now - self.updates_seen - updates, 0)
                self.window.lags[-updates:] = [lag] * min(updates, len(self.window.lags))
                self.updates_seen = updates_now
                self.link.load(weights)
                steps = updates = skipped = 0
                records, last_sync = [], time.monotonic()
                if stop:
                    return "stopped"


@ray.remote(num_cpus=0)
class EvalActor:
    """Plays greedy episodes of given weights."""

    def __init__(self, config: dict[str, Any], spaces: Spaces):
        torch.set_num_threads(1)
        self.cfg = Config.from_dict(config)
        self.model = build_model(self.cfg, spaces)
        self.flat = flatten_parameters(self.model)
        self.envs: dict[int, Any] = {}

    def play(self, weights: np.ndarray, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
        """(returns, lengths, CPU seconds used)."""
        cpu = time.process_time()
        with torch.no_grad():
            self.flat.copy_(_tensor(weights))
        if episodes not in self.envs:
            self.envs[episodes] = make_eval_vector_env(self.cfg.env_id, episodes)
        returns, lengths = play_greedy(self.model, self.envs[episodes], seed, squash=self.cfg.squash)
        return returns, lengths, time.process_time() - cpu


class RemoteEvaluator(Evaluator):
    """The driver's evaluator: eval.csv and best.pt here; the weights from the server; the episodes played
    by the ``EvalActor``."""

    def __init__(self, *args: Any, server: Any, actor: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.server, self.actor = server, actor
        self.remote_cpu_s = 0.0

    def _pull(self) -> tuple[int, int]:
        weights, global_step, updates = ray.get(self.server.snapshot.remote())
        with torch.no_grad():
            self.flat.copy_(_tensor(weights))
        return global_step, updates

    def _play(self, episodes: int, should_stop) -> tuple[np.ndarray, np.ndarray]:
        seed = int(self.rng.integers(2**31 - 1 - episodes))
        returns, lengths, cpu = ray.get(self.actor.play.remote(self.flat.numpy(), episodes, seed))
        self.remote_cpu_s += cpu
        return returns, lengths

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
        worker_seed, eval_seed = seeds
        self.workers = [
            RayWorker.options(max_restarts=config.max_restarts, max_task_retries=0).remote(
                i, config_dict, *dims, self.server, worker_seed, resume_index, start_time
            )
            for i in range(config.workers)
        ]
        self.loops = {i: w.run.remote() for i, w in enumerate(self.workers)}
        self.restarts = 0
        self.worker_restarts = [0] * config.workers
        self.eval_actor = actor = EvalActor.options(
            max_restarts=config.max_restarts, max_task_retries=3
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
            server=self.server,
            actor=actor,
        )
        self.eval_records: queue.Queue[EvalRecord | ErrorRecord] = queue.Queue()
        self.eval_stop = threading.Event()
        self.eval_thread = threading.Thread(target=self._evaluate_loop, name="a3c-ray-evaluator", daemon=True)
        self.eval_thread.start()

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
        except Exception as exc:  # noqa: BLE001 - reported to the trainer as the evaluator's failure
            self.eval_records.put(ErrorRecord("evaluator", f"{type(exc).__name__}: {exc}"))

    def poll(self, timeout: float) -> list[Any]:
        """Wait up to ``timeout`` s; return the records since the last poll (episodes, metrics, evaluations,
        errors) and update the counters mirror. A worker loop that ended by a crash (its actor died and was
        restarted by Ray, or ``run`` raised) is started again, up to ``max_restarts`` per worker."""
        ray.wait(list(self.loops.values()), num_returns=1, timeout=timeout)
        records, slots = ray.get(self.server.drain.remote())
        self._mirror_counters(slots)
        for i, ref in list(self.loops.items()):
            done, _ = ray.wait([ref], timeout=0)
            if not done:
                continue
            try:
                ray.get(ref)
                del self.loops[i]  # stopped on request
            except (RayActorError, RayTaskError) as exc:
                self.restarts += 1
                self.worker_restarts[i] += 1
                if self.worker_restarts[i] > self.config.max_restarts:
                    detail = str(exc)[-2500:]
                    records.append(ErrorRecord(f"worker {i}", f"{detail}\n(past its restart budget)"))
                    del self.loops[i]
                else:
                    print(
                        f"warning: worker {i} crashed ({type(exc).__name__}); restarting its loop", flush=True
                    )
                    self.loops[i] = self.workers[i].run.remote()
        while not self.eval_records.empty():
            records.append(self.eval_records.get())
        return records

    def _mirror_counters(self, slots: np.ndarray) -> None:
        for name, row in zip(("steps", "updates", "skipped"), slots, strict=True):
            getattr(self.counters, name)[:] = _tensor(row)

    def sync(self) -> None:
        """Copy the server's weights, optimizer state and counters into the trainer's objects, in place."""
        weights, optimizer, slots = ray.get(self.server.state.remote())
        flat = self.optimizer.param_groups[0]["params"][0]
        with torch.no_grad():
            flat_view(self.model).copy_(_tensor(weights))
            for key, value in self.optimizer.state[flat].items():
                value.copy_(_tensor(np.asarray(optimizer[key])))
        self._mirror_counters(slots)

    def _stop_evaluator(self, timeout: float = 60.0) -> None:
        self.eval_stop.set()
        self.eval_thread.join(timeout=timeout)

    def final_evaluation(self) -> EvalRecord | None:
        """One more evaluation at a budget's end, as the local evaluator does (its thread stopped first, so
        the two never share the evaluator)."""
        self._stop_evaluator()
        return self.evaluator.evaluate()

    def stop(self, timeout: float = 10.0) -> list[Any]:
        """Stop the workers (each finishes its update and sends its last records) and the evaluator thread;
        sync; tear down the actors. Returns the records that arrived since the last poll."""
        records: list[Any] = []
        try:
            self._stop_evaluator()
            ray.get(self.server.stop.remote())
            ray.wait(list(self.loops.values()), num_returns=len(self.loops), timeout=timeout)
            records, _ = ray.get(self.server.drain.remote())
            while not self.eval_records.empty():
                records.append(self.eval_records.get())
            self.sync()
        finally:
            self.evaluator.close()
            for actor in [*self.workers, self.eval_actor, self.server]:
                ray.kill(actor, no_restart=True)
            if self.started_cluster:
                ray.shutdown()
        return records
