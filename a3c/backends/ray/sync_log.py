"""sync.csv of a Ray node-mode run: per node, every ``SYNC_ROW_S``, its exchanges so far, its global policy
lag and exchange round trip over the interval, and the exchanges the shards applied for it (each of a node's
exchanges reaches every shard once, so the two counts agree)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from a3c.rundir.csvlog import SYNC_COLUMNS, CsvLog
from a3c.runtime.run_clock import RunClock

SYNC_ROW_S = 10.0  # one sync.csv row per node this often


class SyncLog:
    """sync.csv: per node, its exchanges so far and, over the rows' interval, its global policy lag (other
    nodes' exchanges between two of its own) and its exchange round trip."""

    def __init__(self, path: Path, groups: list[list[int]], start_time: RunClock):
        self.log, self.groups, self.start_time = CsvLog(path, SYNC_COLUMNS), groups, start_time
        self.lags: list[list[int]] = [[] for _ in groups]
        self.round_trips: list[list[float]] = [[] for _ in groups]
        self.exchanges = [0] * len(groups)
        self.written = time.monotonic()

    def add(self, node: int, reply: dict[str, Any]) -> None:
        """Take a node's drain ``reply`` (its exchanges: lost incarnations' included)."""
        self.lags[node] += reply["lags"]
        self.round_trips[node] += reply["round_trips"]
        self.exchanges[node] = reply["exchanges"]

    def write_due(self, shards: list[Any], timeout: float, force: bool = False) -> None:
        """A row per node once SYNC_ROW_S has passed (or now, with ``force``), with what ``shards`` applied
        (read within ``timeout`` s; -1 when a shard does not answer)."""
        if not force and time.monotonic() - self.written < SYNC_ROW_S:
            return
        self.written = time.monotonic()
        wall = round(self.start_time.elapsed(), 3)
        try:  # what the shards applied, per node: each exchange of a node reaches every shard once
            replies = ray.get([s.counts.remote() for s in shards], timeout=timeout)
            counts = np.stack([c for c, _ in replies])
        except (GetTimeoutError, RayActorError):
            counts = np.full((1, len(self.groups)), -1)  # a lost shard: the run is failing anyway
        for i, ids in enumerate(self.groups):
            lags, trips = self.lags[i] or [0], self.round_trips[i] or [float("nan")]
            row = (wall, i, len(ids), self.exchanges[i], round(float(np.mean(lags)), 3), int(np.max(lags)))
            shard_counts = int(counts[:, i].min()), int(counts[:, i].max())
            self.log.write((*row, round(float(np.median(trips)), 3), *shard_counts))
            self.lags[i], self.round_trips[i] = [], []

    def close(self) -> None:
        """Close the file (the last rows are written by the driver while the shards still live)."""
        self.log.close()
