"""``a3c bench --shard-load``: the load on the Ray node mode's sharded global model.

Fake nodes (Ray actors without envs or workers) each run the node group's own ``Syncer`` over a flat vector
of the model's real size: every sync interval, one exchange of a real-sized change with every shard in
parallel, one in flight per node. For each shards × nodes × interval point, after a warm-up, a row gives:

- exchanges/s the shards applied (shard 0's own counters, all nodes) against nodes ÷ interval, and the
  slowest and fastest node's rate against 1 ÷ interval (1.00: on time);
- the exchange round trip, p50 and p99 (ms), as the fake nodes timed it;
- shard CPU: each shard process's CPU seconds over the window per second (cores), the busiest shard's, and
  per exchange (ms).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from a3c.core.errors import BadInput
from a3c.tools.bench.load_common import load_results, require_extras, save_results, start_local_ray
from a3c.tools.bench.report import fmt

CALL_TIMEOUT_S = 60.0  # one exchange, or one reading, on a loaded machine


def percentile(values: list[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation between ranks, numpy's default); None if empty."""
    return float(np.percentile(values, q)) if len(values) else None


class FakeNode:
    """A node group without workers (a Ray actor, num_cpus 0): its syncer exchanges a vector of ``size``
    with ``shards`` every ``interval`` s."""

    def __init__(self, index: int, size: int, shards: list[Any], bounds: list, interval: float):
        import torch

        from a3c.backends.ray.syncer import Syncer

        torch.set_num_threads(1)
        self.flat = torch.zeros(size)
        self.syncer = Syncer(index, self.flat, shards, bounds, interval, CALL_TIMEOUT_S)
        self.syncer.start()

    def take(self) -> tuple[int, list[float]]:
        """(exchanges so far, the round trips in ms since the last take)."""
        exchanges, _, round_trips = self.syncer.take()
        return exchanges, round_trips

    def stop(self) -> None:
        """End the syncer's loop (its last exchange included)."""
        self.syncer.stop()


@dataclass(frozen=True)
class ShardPlan:
    """The model (load_common.MODELS), the grid, and seconds per point after the warm-up."""

    model: str
    shards: tuple[int, ...]
    nodes: tuple[int, ...]
    intervals: tuple[float, ...]
    seconds: float


def _readings(shards: list[Any], nodes: list[Any]) -> tuple[np.ndarray, np.ndarray, list, list]:
    """(shard 0's exchanges per node, every shard's CPU seconds, each node's exchange count, its round
    trips since the last reading)."""
    import ray

    shard_counts = ray.get([s.counts.remote() for s in shards], timeout=CALL_TIMEOUT_S)
    node_takes = ray.get([n.take.remote() for n in nodes], timeout=CALL_TIMEOUT_S)
    cpu = np.array([c for _, c in shard_counts])
    return shard_counts[0][0], cpu, [e for e, _ in node_takes], [r for _, r in node_takes]


def measure_point(size: int, shards_n: int, nodes_n: int, interval: float, seconds: float) -> dict[str, Any]:
    """One row: fresh shards and fake nodes, a warm-up of two intervals (at least 1 s), ``seconds``
    measured."""
    import ray

    from a3c.backends.ray.exchange import shard_bounds
    from a3c.backends.ray.shard import ParamShard
    from a3c.runtime.supervisor import STARTUP_TIMEOUT_S

    bounds = shard_bounds(size, shards_n)
    shards = [
        ParamShard.remote(k, np.zeros(b - a, np.float32), nodes_n, 1.0) for k, (a, b) in enumerate(bounds)
    ]
    node_class = ray.remote(num_cpus=0)(FakeNode)
    nodes = [node_class.remote(i, size, shards, bounds, interval) for i in range(nodes_n)]
    try:
        ray.get([n.take.remote() for n in nodes], timeout=STARTUP_TIMEOUT_S)  # up
        time.sleep(max(1.0, 2 * interval))  # the warm-up: pacing the measurement, not synchronising
        applied0, cpu0, ex0, _ = _readings(shards, nodes)
        start = time.monotonic()
        time.sleep(seconds)
        applied1, cpu1, ex1, trips = _readings(shards, nodes)
        window = time.monotonic() - start
        ray.get([n.stop.remote() for n in nodes], timeout=CALL_TIMEOUT_S)
    finally:
        for actor in [*nodes, *shards]:
            ray.kill(actor, no_restart=True)
    applied = int((applied1 - applied0).sum())
    per_node = [(b - a) * interval / window for a, b in zip(ex0, ex1, strict=True)]
    round_trips = [t for node in trips for t in node]
    shard_cpu = (cpu1 - cpu0) / window
    return {
        "shards": shards_n,
        "nodes": nodes_n,
        "interval_s": interval,
        "window_s": window,
        "exchanges_per_s": applied / window,
        "expected_per_s": nodes_n / interval,
        "node_rate_min": min(per_node),
        "node_rate_max": max(per_node),
        "round_trip_p50_ms": percentile(round_trips, 50),
        "round_trip_p99_ms": percentile(round_trips, 99),
        "shard_cpu_mean": float(shard_cpu.mean()),
        "shard_cpu_max": float(shard_cpu.max()),
        "shard_cpu_ms_per_exchange": float(shard_cpu.mean() * window / applied * 1e3) if applied else None,
    }


def markdown(results: dict[str, Any]) -> str:
    """One table row per point."""
    mb = results["params"] * 4 / 1e6
    lines = [
        f"### Shard load: {results['model']} ({results['params']:,} parameters, {mb:.2f} MB per change), "
        f"{results['plan']['seconds']:g} s per row",
        "",
        "| shards | nodes | interval (s) | exchanges/s (expected) | node rate min–max | round trip p50 / p99 "
        "(ms) | shard CPU mean / max (cores) | shard CPU per exchange (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["points"]:
        per = r["shard_cpu_ms_per_exchange"]
        lines.append(
            f"| {r['shards']} | {r['nodes']} | {r['interval_s']:g} | {r['exchanges_per_s']:.2f} "
            f"({r['expected_per_s']:.2f}) | {r['node_rate_min']:.2f}–{r['node_rate_max']:.2f} | "
            f"{fmt(r['round_trip_p50_ms'])} / {fmt(r['round_trip_p99_ms'])} | {r['shard_cpu_mean']:.3f} / "
            f"{r['shard_cpu_max']:.3f} | {'—' if per is None else f'{per:.2f}'} |"
        )
    return "\n".join(lines)


def parse_list(option: str, text: str, kind: type) -> tuple:
    """``"1,2,4"`` → (1, 2, 4) of ``kind`` (int or float), each > 0; else BadInput naming ``option``."""
    try:
        items = tuple(kind(item.strip()) for item in text.split(","))
    except ValueError:
        items = ()
    if not items or not all(item > 0 for item in items):
        raise BadInput(f"{option}: {text!r} is not allowed; expected numbers > 0 separated by commas")
    return items


def run_shard_load(plan: ShardPlan, out_dir: Path, log=print) -> dict[str, Any]:
    """Every point of ``plan`` on a Ray instance of its own; writes
    ``out_dir/shard-load-<model>-<time>.json``."""
    import ray

    results = load_results("shard_load", plan)
    start_local_ray()
    try:
        for shards in plan.shards:
            for nodes in plan.nodes:
                for interval in plan.intervals:
                    row = measure_point(results["params"], shards, nodes, interval, plan.seconds)
                    results["points"].append(row)
                    log(f"{shards} shards, {nodes} nodes, {interval:g} s: {row['exchanges_per_s']:.2f}/s")
    finally:
        ray.shutdown()
    return save_results(results, out_dir, markdown)


def shard_load(opts: dict[str, Any]) -> dict[str, Any]:
    """``a3c bench --shard-load``: check the options and the extras it needs, then run."""
    import sys

    plan = ShardPlan(
        opts["model"],
        parse_list("--shards", opts["shard_counts"], int),
        parse_list("--nodes", opts["node_counts"], int),
        parse_list("--intervals", opts["intervals"], float),
        opts["seconds"],
    )
    require_extras(opts["model"], "--shard-load")
    return run_shard_load(plan, opts["out"], log=lambda msg: print(msg, file=sys.stderr, flush=True))
