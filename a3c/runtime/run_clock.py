"""A run's elapsed time: what its ``wall_time`` column, its ``max_seconds`` budget and its learning-rate
schedule count, on the monotonic clock.

The wall clock (``time.time()``) jumps: NTP steps it, a person sets it, a VM resumes with it behind. A jump
counted as run time would end a run early, zero or raise a linear learning rate, and put rows out of order
(a later resume would then drop good ones). ``CLOCK_MONOTONIC`` never jumps and is one clock for every
process on a machine (a child's reading is the trainer's); the Unix time is kept only to show people when
the run began (summary.json's ``start_unix``) and for a process on another machine (a Ray node), whose
monotonic clock counts from its own boot.
"""

from __future__ import annotations

import functools
import socket
import time
from dataclasses import dataclass
from pathlib import Path


@functools.cache
def this_machine() -> str:
    """What tells this machine's monotonic clock apart: the kernel's boot id (one per boot, the same in
    every container on it), else the host name."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


@dataclass(frozen=True)
class RunClock:
    """When a run (set back by the time of its earlier segments) began, on both clocks.

    unix: ``time.time()`` then, for people and other machines.
    monotonic: ``time.monotonic()`` then, on ``machine`` (``this_machine()`` of the trainer).
    """

    unix: float
    monotonic: float
    machine: str

    @classmethod
    def started(cls, elapsed: float = 0.0) -> RunClock:
        """A clock started now, ``elapsed`` seconds ago (a resumed run's wall time so far)."""
        return cls(time.time() - elapsed, time.monotonic() - elapsed, this_machine())

    def elapsed(self) -> float:
        """Seconds of the run so far: monotonic on the trainer's machine, by the Unix time elsewhere."""
        if self.machine == this_machine():
            return time.monotonic() - self.monotonic
        return time.time() - self.unix

    def later(self, seconds: float) -> RunClock:
        """This clock started ``seconds`` later: time that is not the run's (callbacks' ``on_start``)."""
        return RunClock(self.unix + seconds, self.monotonic + seconds, self.machine)
