"""The run's CSV logs: their columns (a contract: only ever added at the end) and an appending writer."""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EVAL_COLUMNS = (
    "wall_time",
    "global_step",
    "updates",
    "mean_return",
    "std_return",
    "min_return",
    "max_return",
    "mean_length",
    "episodes",
)


EPISODE_COLUMNS = ("wall_time", "global_step", "worker", "return", "length")


METRICS_COLUMNS = (
    "wall_time",
    "global_step",
    "worker",
    "updates",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "explained_variance",
    "learning_rate",
    "policy_lag_mean",
    "policy_lag_p50",
    "policy_lag_p95",
    "policy_lag_max",
    "steps_per_s",
)


# A Ray node-mode run's: per node, its exchanges and global policy lag (a3c/backends/ray/sync_log.py).
SYNC_COLUMNS = (
    "wall_time",
    "node",
    "workers",
    "exchanges",
    "global_lag_mean",
    "global_lag_max",
    "round_trip_ms_p50",
    "shard_exchanges_min",
    "shard_exchanges_max",
)


# Every CSV a run writes, by file name (fsynced before each checkpoint, trimmed at a resume).
LOG_FILES = ("eval.csv", "episodes.csv", "metrics.csv", "sync.csv")


class CsvLog:
    """Append rows to a CSV file with a fixed header, flushed per row so readers see them live. A row the file
    system refuses (a full disk) leaves no part of itself behind: the file is cut back to its last whole
    row and the OSError raised."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = path
        new = not path.exists() or path.stat().st_size == 0
        if not new:  # appending: the file's header must be ours, or rows would go under other columns
            with path.open(newline="") as f:
                header = next(csv.reader(f), [])
            if header != list(columns):
                raise ValueError(f"{path}: header {header} is not {list(columns)}; not appending to it")
        self._file = path.open("a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(columns)
            self._file.flush()
        self._whole = self._file.tell()  # the file's size after its last whole row

    def write(self, row: Sequence[Any]) -> None:
        """Append ``row`` (one value per column) and flush; on an OSError, none of it stays in the file."""
        try:
            self._writer.writerow(row)
            self._file.flush()
        except OSError:
            self._cut_back()
            raise
        self._whole = self._file.tell()

    def _cut_back(self) -> None:
        """Drop what the failed write left in the buffer and the file: reopen at the last whole row."""
        with contextlib.suppress(OSError):
            self._file.close()  # its flush fails again; the buffer goes with the object
        with contextlib.suppress(OSError):
            os.truncate(self.path, self._whole)
        self._file = self.path.open("a", newline="")
        self._writer = csv.writer(self._file)

    def close(self) -> None:
        """Close the file (a full disk at the end: cut back to the last whole row, quietly)."""
        try:
            self._file.close()
        except OSError:
            self._cut_back()
            self._file.close()
