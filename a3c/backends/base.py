"""The Backend protocol: how the learners and the evaluator of one run are executed.

The training loop (a3c/training/train.py) is the same for every backend: poll records → monitor → budgets and
signals → finite check → periodic checkpoint. A backend only says where the learners run: in this process
(``serial``), in child processes over shared memory (``local``), or as Ray actors (``ray``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from a3c.core.records import ErrorRecord


class BackendFailed(RuntimeError):
    """A part of the backend died or hung where it cannot be restarted; ``record()`` is the run's error."""

    def __init__(self, source: str, message: str):
        super().__init__(message)
        self.source = source

    def record(self) -> ErrorRecord:
        """This failure as the run's ErrorRecord (source and message)."""
        return ErrorRecord(self.source, str(self))


class Backend(Protocol):
    """One run's execution. Records are what the monitor takes: lists of EpisodeRecord, MetricsRecord,
    EvalRecord, ErrorRecord. Every call returns within its timeout (invariant 7)."""

    restarts: int  # child or actor restarts so far

    def poll(self, timeout: float) -> list[Any]:
        """The records that arrived, waiting at most ``timeout`` s (serial: one update, and an evaluation
        when one is due). A failure arrives as an ErrorRecord, or raises BackendFailed."""
        ...

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf count} of the current global weights (read from one copy)."""
        ...

    def sync(self) -> None:
        """Bring the trainer's model, optimizer and counters up to date before a checkpoint (no-op where
        they are the shared state itself)."""
        ...

    def final_evaluation(self) -> list[Any]:
        """After a budget stop: the final evaluation's records (empty where the evaluator plays it itself)."""
        ...

    def stop(self, cut_short: Callable[[], bool]) -> list[Any]:
        """Stop everything, waiting a bounded time (shorter once ``cut_short()`` is true: a second Ctrl-C);
        return the records that were still on their way."""
        ...
