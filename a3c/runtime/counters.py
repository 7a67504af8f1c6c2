"""Run state that lives in shared memory besides the model and its optimizer (``a3c.algo.optim``):
exact per-worker counters, heartbeats and the stop signal. Each is created by the trainer before any child
starts; a child writes only its own slots, so no lock is needed.
"""

from __future__ import annotations

import enum
import time

import numpy as np
import torch


class _NumpyViews:
    """Lazily made numpy views of shared int64 tensors: reads and writes of a few ns instead of a torch op's
    µs. The views are per process (never pickled); the memory under them is the shared tensor's."""

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_view_")}

    def _view(self, name: str) -> np.ndarray:
        view = self.__dict__.get(f"_view_{name}")
        if view is None:
            view = self.__dict__[f"_view_{name}"] = getattr(self, name).numpy()
        return view


class Counters(_NumpyViews):
    """Exact counts without a lock: worker i writes only slot i of each int64 vector; readers sum.

    ``steps[i]`` env steps, ``updates[i]`` optimizer updates and ``skipped[i]`` updates skipped for a
    non-finite gradient, by worker i; ``base`` holds the totals a resumed run starts from [steps, updates,
    skipped], so totals never go back across a resume (invariant 5).
    """

    def __init__(self, num_workers: int, base_steps: int = 0, base_updates: int = 0, base_skipped: int = 0):
        self.steps = torch.zeros(num_workers, dtype=torch.int64).share_memory_()
        self.updates = torch.zeros(num_workers, dtype=torch.int64).share_memory_()
        self.skipped = torch.zeros(num_workers, dtype=torch.int64).share_memory_()
        self.base = torch.tensor([base_steps, base_updates, base_skipped], dtype=torch.int64)

    def add(self, worker: int, steps: int, skipped: bool = False) -> None:
        """Record one update of ``steps`` env steps by ``worker`` (its own slots only)."""
        self._view("steps")[worker] += steps
        self._view("updates")[worker] += 1
        if skipped:
            self._view("skipped")[worker] += 1

    @property
    def total_steps(self) -> int:
        """Env steps of the whole run: the resumed base plus every worker's slot."""
        return int(self.base[0]) + int(self._view("steps").sum())

    @property
    def total_updates(self) -> int:
        """Optimizer updates of the whole run (skipped ones included), base plus every worker's slot."""
        return int(self.base[1]) + int(self._view("updates").sum())

    @property
    def total_skipped(self) -> int:
        """Updates skipped for a non-finite gradient over the whole run, base plus every worker's slot."""
        return int(self.base[2]) + int(self._view("skipped").sum())

    def snapshot(self) -> dict[str, int | torch.Tensor]:
        """The totals and this run segment's per-worker slots, each slot read once (for a checkpoint): a total
        summed from a second read could count an update the copied slots do not hold (invariant 9)."""
        steps, updates, skipped = self.steps.clone(), self.updates.clone(), self.skipped.clone()
        return {
            "global_step": int(self.base[0]) + int(steps.sum()),
            "updates": int(self.base[1]) + int(updates.sum()),
            "skipped_updates": int(self.base[2]) + int(skipped.sum()),
            "worker_steps": steps,
            "worker_updates": updates,
        }


class Heartbeats(_NumpyViews):
    """One float64 slot per child (workers 0..N-1, then the evaluator) and one for the trainer (``trainer``,
    the last): the ``time.monotonic()`` of its last sign of life. Each process writes only its own slot; the
    trainer reads the children's to find a hung child, each child the trainer's to find a hung trainer."""

    def __init__(self, num_children: int):
        self.times = torch.zeros(num_children + 1, dtype=torch.float64).share_memory_()
        self.trainer = num_children

    @staticmethod
    def now() -> float:
        """The clock the slots are stamped with."""
        return time.monotonic()

    def beat(self, slot: int) -> None:
        """Stamp ``slot`` with the current ``time.monotonic()``."""
        # CLOCK_MONOTONIC is one clock for all processes on Linux, and a clock step (NTP) cannot fake a hang.
        self._view("times")[slot] = time.monotonic()

    def clear(self, slot: int) -> None:
        """Mark ``slot`` as not started yet (no beat)."""
        self._view("times")[slot] = 0.0

    def age(self, slot: int) -> float | None:
        """Seconds since ``slot``'s last beat, or None before its first one."""
        last = float(self._view("times")[slot])
        return None if last == 0.0 else time.monotonic() - last


class StopReason(enum.IntEnum):
    """Why a run stops; the first reason set wins."""

    RUNNING = 0
    SOLVED = 1
    MAX_STEPS = 2
    MAX_SECONDS = 3
    INTERRUPTED = 4
    FAILED = 5
    PRUNED = 6  # a3c tune's callback asked to stop (pruning a trial)
    CALLBACK = 7  # a callback asked to stop (a3c.training.callbacks)

    @property
    def is_budget(self) -> bool:
        """A planned end (solved, max steps, max seconds), after which a final evaluation is played."""
        return self in (StopReason.SOLVED, StopReason.MAX_STEPS, StopReason.MAX_SECONDS)


class StopSignal(_NumpyViews):
    """The run's stop flag: one shared int64 holding the StopReason (RUNNING = 0 while it runs).

    Deliberately not a multiprocessing Event: its Condition blocks ``set()`` forever when a process died while
    waiting on it (or while holding its lock), which would hang the trainer exactly when a child crashes.
    A plain shared word has no lock to lose; a waiting process polls it every ``POLL_S`` seconds.
    """

    POLL_S = 0.05

    def __init__(self):
        self.flag = torch.zeros((), dtype=torch.int64).share_memory_()

    def stop(self, reason: StopReason) -> None:
        """Set the stop, keeping the first reason (a race between two setters may keep either)."""
        view = self._view("flag")
        if view[()] == StopReason.RUNNING:
            view[()] = int(reason)

    def is_set(self) -> bool:
        """True once any stop reason has been set."""
        return self._view("flag")[()] != StopReason.RUNNING

    @property
    def reason(self) -> StopReason:
        """The stop reason set first (RUNNING while none is)."""
        return StopReason(int(self._view("flag")[()]))
