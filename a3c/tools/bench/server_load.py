"""``a3c bench --server-load``: the ceiling of the Ray backend's gradient-mode parameter server.

N light client actors push a precomputed gradient of the real size to one ``ParameterServer`` as fast as
each gets its reply (one call in flight per client, as a worker with ``sync_every`` 1), with no env
stepping. Per N, after a warm-up: applied updates/s (the server's own counter), push round trip p50/p95
(ms), and the server process's CPU (cores, and per update: 1000 / that is its ceiling on a core of its
own). Models: ``mlp`` is the CartPole-v1 preset's MLP, ``atari`` the ALE/Pong-v5 preset's conv net + LSTM.
The node mode's shards have their own load test (shard_load.py).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from a3c.core.errors import BadInput
from a3c.tools.bench.load_common import (
    load_results,
    model_config,
    param_count,
    require_extras,
    save_results,
    start_local_ray,
)

WARMUP_S = 1.0  # Ray's first calls (object-store buffers, the clients' imports) stay out of the window
CALL_TIMEOUT_S = 60.0  # one push, or one reading, on a loaded machine
STARTUP_TIMEOUT_S = 120.0  # an actor's first answer: Ray starts a process and imports torch


def _new_server(config: Any, spaces: Any) -> Any:
    """A ``ParameterServer`` for ``config`` from a fresh model and optimizer, built as the driver does."""
    from a3c.algo.learner.learner import build_shared
    from a3c.backends.ray.actors import ParameterServer

    model, optimizer = build_shared(config, spaces)
    base = [0, 0, 0]  # steps, updates, skipped before this run
    stats: dict = {}  # no observation or return statistics: both are off (set so below)
    return ParameterServer.options(num_cpus=0).remote(
        config.to_dict(), spaces, model.state_dict(), optimizer.state_dict(), base, stats
    )


def _push_once(server: Any, worker: int, grad: np.ndarray, lr: float) -> np.ndarray:
    """One push of ``grad`` [params] as ``worker`` (1 update, no records) and its reply: the new weights."""
    import ray

    reply = server.push.remote(worker, grad, (0, 1, 0), lr, [], {})
    return ray.get(reply, timeout=CALL_TIMEOUT_S)[0]


def _server_reading(server: Any, timeout: float = CALL_TIMEOUT_S) -> tuple[int, float]:
    """(updates applied so far, the server process's CPU seconds so far)."""
    import ray

    updates = ray.get(server.snapshot.remote(), timeout=timeout)[2]
    cpu = ray.get(server.__ray_call__.remote(_process_cpu_s), timeout=timeout)
    return int(updates), float(cpu)


def _process_cpu_s(_actor: Any) -> float:
    return time.process_time()  # all threads of the actor's process (Ray's own included)


class LoadClient:
    """Pushes one fixed gradient to the server in a loop: a worker without envs (a Ray actor, num_cpus 0)."""

    def __init__(self, worker: int, server: Any, params: int, lr: float):
        self.worker, self.server, self.lr = worker, server, lr
        # A real-sized gradient of small values: the optimizer step costs what a real one costs.
        self.grad = np.random.default_rng(worker).normal(0.0, 1e-4, params).astype(np.float32)
        self.weights = np.empty(params, np.float32)

    def ready(self) -> bool:
        """True once the actor is up (its process started and this module imported)."""
        return True

    def run(self, warm_until: float, end_at: float) -> list[float]:
        """Push until ``end_at`` (``time.time()``); return the round trips (s) of the pushes started from
        ``warm_until`` on. Each reply's weights are copied out, as a worker loads them."""
        latencies: list[float] = []
        while (started := time.time()) < end_at:
            tick = time.perf_counter()
            weights = _push_once(self.server, self.worker, self.grad, self.lr)
            elapsed = time.perf_counter() - tick
            if started >= warm_until:
                latencies.append(elapsed)
            np.copyto(self.weights, weights)
        return latencies


def percentile(values: list[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation between ranks, numpy's default); None if empty."""
    return float(np.percentile(values, q)) if len(values) else None


def summarize_point(
    clients: int, updates: int, window_s: float, latencies_s: list[float], server_cpu_s: float
) -> dict[str, Any]:
    """One row: ``updates`` applied by the server over ``window_s`` s, the clients' round trips (s) of the
    pushes they started in the window, and the server's CPU seconds over it."""
    lat_ms = np.asarray(latencies_s, np.float64) * 1e3
    p50, p95 = percentile(lat_ms, 50), percentile(lat_ms, 95)
    return {
        "clients": clients,
        "window_s": window_s,
        "updates": updates,
        "updates_per_s": updates / window_s,
        "client_pushes": len(lat_ms),
        "latency_p50_ms": p50,
        "latency_p95_ms": p95,
        "server_cpu": server_cpu_s / window_s,
        "server_cpu_ms_per_update": server_cpu_s / updates * 1e3 if updates else None,
    }


def parse_clients(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` → (1, 2, 4, 8); BadInput unless every item is an integer >= 1."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() and int(item) >= 1 for item in items):
        raise BadInput(f"--clients: {text!r} is not allowed; expected integers >= 1 separated by commas")
    return tuple(int(item) for item in items)


def markdown(results: dict[str, Any]) -> str:
    """The results as a markdown table, one row per client count."""
    lines = [
        f"### Parameter-server load: {results['model']} ({results['env_id']}, {results['params']:,} "
        f"parameters, {results['params'] * 4 / 1e6:.2f} MB per gradient), {results['plan']['seconds']:g} s "
        "per row",
        "",
        "| clients | applied updates/s | push round trip p50 (ms) | p95 (ms) | server CPU (cores) | "
        "server CPU per update (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["points"]:
        p50, p95, per_update = row["latency_p50_ms"], row["latency_p95_ms"], row["server_cpu_ms_per_update"]
        lines.append(
            f"| {row['clients']} | {row['updates_per_s']:,.0f} | "
            f"{'—' if p50 is None else f'{p50:.2f}'} | {'—' if p95 is None else f'{p95:.2f}'} | "
            f"{row['server_cpu']:.2f} | {'—' if per_update is None else f'{per_update:.2f}'} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class LoadPlan:
    """What to measure: the model (``load_common.MODELS``), the client counts, seconds per count after the
    warm-up."""

    model: str
    clients: tuple[int, ...]
    seconds: float
    warmup_s: float = WARMUP_S


def _wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))  # pacing the measurement window, not synchronising


def measure_point(plan: LoadPlan, clients: int) -> dict[str, Any]:
    """One row: a fresh server and ``clients`` clients, a warm-up, then ``plan.seconds`` measured."""
    import ray

    config, spaces = model_config(plan.model, clients)
    server = _new_server(config, spaces)
    actors = [server]
    try:
        _server_reading(server, timeout=STARTUP_TIMEOUT_S)  # it has started
        params = param_count(config, spaces)
        client_class = ray.remote(num_cpus=0)(LoadClient)
        actors += [client_class.remote(i, server, params, config.lr) for i in range(clients)]
        ray.get([a.ready.remote() for a in actors[1:]], timeout=STARTUP_TIMEOUT_S)
        warm_until = time.time() + plan.warmup_s
        end_at = warm_until + plan.seconds
        runs = [a.run.remote(warm_until, end_at) for a in actors[1:]]
        _wait_until(warm_until)
        updates0, cpu0 = _server_reading(server)
        start = time.monotonic()
        _wait_until(end_at)
        updates1, cpu1 = _server_reading(server)
        window = time.monotonic() - start
        latencies = [x for run in ray.get(runs, timeout=CALL_TIMEOUT_S + 10) for x in run]
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
    return summarize_point(clients, updates1 - updates0, window, latencies, cpu1 - cpu0)


def run_server_load(plan: LoadPlan, out_dir: Path, log=print) -> dict[str, Any]:
    """Measure every client count of ``plan`` on a local Ray instance started (and shut down) here; write
    ``out_dir/server-load-<model>-<time>.json`` and return the results (with the markdown and the path)."""
    import ray

    results = load_results("server_load", plan)
    start_local_ray()
    try:
        for clients in plan.clients:
            row = measure_point(plan, clients)
            results["points"].append(row)
            log(f"{clients} clients: {row['updates_per_s']:,.0f} updates/s applied")
    finally:
        ray.shutdown()
    return save_results(results, out_dir, markdown)


def server_load(opts: dict[str, Any]) -> dict[str, Any]:
    """``a3c bench --server-load``: check the options and the extras it needs, then run."""
    clients = parse_clients(opts["clients"])
    require_extras(opts["model"], "--server-load")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    return run_server_load(LoadPlan(opts["model"], clients, opts["seconds"]), opts["out"], log=log)
