"""Spawned children under supervision: one pipe each, heartbeats, restarts within a budget.

Each child writes its records to a pipe of its own (one writer, no lock), so a child killed at any instant
cannot leave a lock held that would block the others, as a shared queue could; a message it could not
finish only ends that pipe (EOF), since the trainer holds no copy of the write end. The trainer reads each
pipe without blocking (``RecordReader``) and decodes a record only once all its bytes have arrived, so a child
stopped in the middle of a large record (SIGSTOP, a debugger, swapped out) cannot block supervision: it just
stops beating and is killed as hung.
A child that dies, or stops beating for ``hang_timeout`` seconds, is restarted with a fresh seed stream,
up to ``max_restarts`` times within ``RESTART_WINDOW_S``; past that the run fails with its last error.
Silence is counted in time the supervisor itself ran (``SilenceWatch``): after the whole group was
stopped and continued, every child gets a fresh timeout instead of being killed as hung. Each poll beats
the trainer's own slot, which every child watches in turn (``a3c.runtime.child``).
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from a3c.core.records import ErrorRecord
from a3c.runtime.child import TRAINER_LOST
from a3c.runtime.counters import Heartbeats
from a3c.runtime.pipe import RecordReader
from a3c.runtime.silence import SilenceWatch

RESTART_WINDOW_S = 600.0
# A new process's first sign of life (a child's heartbeat, a Ray actor's answer) comes after it is started and
# has imported torch: slow on a loaded machine. The Ray backend's actors get the same allowance.
STARTUP_TIMEOUT_S = 120.0
RECV_MAX = 200  # records taken from one child per poll, so one flooding child cannot starve supervision
RECV_MAX_BYTES = 16 << 20  # bytes read from one child per poll, for the same reason with large records


@dataclass
class ChildSpec:
    """How to (re)start one child: ``target(**kwargs(restart, writer))`` in a new process, ``writer`` the
    sending end of its pipe to the trainer and ``restart`` how often it started before."""

    name: str
    slot: int
    target: Callable[..., None]
    kwargs: Callable[[int, Connection], dict[str, Any]]


@dataclass
class Child:
    """One supervised child: its current process and pipe, how often it started (the next restart index),
    when it last started, its restarts within RESTART_WINDOW_S and the last ErrorRecord it sent."""

    spec: ChildSpec
    process: Any = None
    reader: RecordReader | None = None
    started: int = 0
    started_at: float = 0.0
    recent_restarts: deque = field(default_factory=deque)
    last_error: ErrorRecord | None = None


class Supervisor:
    """Starts, watches, restarts and finally stops a set of children.

    Args:
        ctx: a spawn (or forkserver) multiprocessing context.
        specs: one per child.
        heartbeats: the shared heartbeat slots the children beat.
        handle: called with every record that is not an ErrorRecord.
        max_restarts: restarts allowed per child within RESTART_WINDOW_S.
        hang_timeout: seconds without a heartbeat after which a child counts as crashed.
    """

    def __init__(
        self,
        ctx,
        specs: list[ChildSpec],
        heartbeats: Heartbeats,
        handle: Callable[[Any], None],
        max_restarts: int,
        hang_timeout: float,
    ):
        self.ctx = ctx
        self.children = [Child(spec) for spec in specs]
        self.heartbeats = heartbeats
        self.handle = handle
        self.max_restarts = max_restarts
        self.hang_timeout = hang_timeout
        self.restarts = 0
        self.failure: ErrorRecord | None = None
        self.watch = SilenceWatch(heartbeats.now())

    def _start(self, child: Child) -> None:
        reader, writer = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(
            target=child.spec.target,
            name=f"a3c-{child.spec.name.replace(' ', '-')}",
            kwargs=child.spec.kwargs(child.started, writer),
        )
        self.heartbeats.clear(child.spec.slot)  # until its first beat, the start-up timeout applies
        self.heartbeats.beat(self.heartbeats.trainer)  # a slow start of many children is no trainer hang
        self.watch.restart(child.spec.slot)
        child.started_at = self.heartbeats.now()
        # The child inherits an ignored SIGINT (then Python installs no KeyboardInterrupt handler in it), so a
        # Ctrl-C sent to the whole process group reaches only the trainer, which stops children in order.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process.start()
        finally:
            signal.signal(signal.SIGINT, previous)
        writer.close()
        child.process, child.reader, child.last_error = process, RecordReader(reader), None
        child.started += 1

    def start_all(self) -> None:
        """Start every child, in the order of ``specs``."""
        for child in self.children:
            self._start(child)

    def _receive(self, child: Child, limit: int | None) -> None:
        """Deliver the whole records ``child`` has sent, at most ``limit`` (and RECV_MAX_BYTES read) unless
        None; never waits for the rest of a record (see RecordReader)."""
        taken = 0
        if child.reader is None:
            return
        read_until = float("inf") if limit is None else child.reader.bytes_read + RECV_MAX_BYTES
        while child.reader is not None and (limit is None or taken < limit):
            try:
                got, record = child.reader.next(read_until)
            except (EOFError, OSError):  # the child is gone and its pipe is drained: stop watching it
                child.reader.close()
                child.reader = None
                return
            except Exception:  # a record that does not unpickle: a bug, and the run must not go on without it
                if self.failure is None:
                    self.failure = ErrorRecord("trainer", traceback.format_exc())
                return
            if not got:
                return
            taken += 1
            if isinstance(record, ErrorRecord):
                child.last_error = record
                continue
            try:
                self.handle(record)
            except Exception:  # e.g. a CSV write on a full disk: the run must stop, not lose rows silently
                if self.failure is None:
                    self.failure = ErrorRecord("trainer", traceback.format_exc())

    def poll(self, timeout: float, stopped: Callable[[], bool]) -> None:
        """Wait up to ``timeout`` for records or exits; deliver records; restart dead or hung children.

        Nothing is restarted once ``stopped()`` (read again after the wait: a child that set the stop flag
        and exited meanwhile ended normally). Sets ``self.failure`` when a child is past its budget.
        """
        readers = [c.reader for c in self.children if c.reader is not None]
        sentinels = [
            c.process.sentinel for c in self.children if c.process is not None and c.process.is_alive()
        ]
        self.heartbeats.beat(self.heartbeats.trainer)
        # Records already buffered (left over from RECV_MAX) do not make their pipe readable: do not wait.
        wait(readers + sentinels, timeout=0 if any(r.pending() for r in readers) else timeout)
        self.watch.passed(self.heartbeats.now(), timeout)
        for child in self.children:
            self._receive(child, RECV_MAX)
        for child in self.children:
            if stopped() or self.failure is not None:
                return
            if child.process.exitcode == TRAINER_LOST:  # it waited for us in vain: no fault of its own
                self._receive(child, None)
                self._restart_after_trainer_silence(child)
                continue
            if child.process.exitcode is not None:
                self._receive(child, None)  # its ErrorRecord, if it sent one before dying
                reason = f"{child.spec.name} died with exit code {child.process.exitcode}"
            elif (silent := self._silent_for(child)) is not None:
                child.process.kill()
                child.process.join(timeout=5.0)
                if child.process.is_alive():  # not even SIGKILL ended it: do not start a second one
                    self.failure = ErrorRecord(
                        child.spec.name, f"{child.spec.name} hung and could not be killed"
                    )
                    return
                self._receive(child, None)  # what it sent before it hung (reading cannot block now)
                reason = f"{child.spec.name} sent no heartbeat for {silent:g} s and was killed"
            else:
                continue
            self._crashed(child, reason)

    def _restart_after_trainer_silence(self, child: Child) -> None:
        """Start again a child that stopped because this trainer was silent (a long callback, checkpoint
        or final evaluation, a stopped trainer): counted in ``restarts``, not against the restart budget."""
        if child.reader is not None:
            child.reader.close()
            child.reader = None
        self.restarts += 1
        print(
            f"warning: {child.spec.name} stopped while the trainer was silent; restarting it",
            file=sys.stderr,
            flush=True,
        )
        self._start(child)

    def _silent_for(self, child: Child) -> float | None:
        """The timeout a child has exceeded without a heartbeat (None while it is fine)."""
        age = self.heartbeats.age(child.spec.slot)
        silence = self.watch.silence(child.spec.slot, age, child.started_at, self.heartbeats.now())
        starting = age is None  # no beat yet: the start-up allowance applies
        limit = max(self.hang_timeout, STARTUP_TIMEOUT_S) if starting else self.hang_timeout
        return limit if silence > limit else None

    def _crashed(self, child: Child, reason: str) -> None:
        error = child.last_error or ErrorRecord(child.spec.name, reason)
        now = time.monotonic()
        while child.recent_restarts and now - child.recent_restarts[0] > RESTART_WINDOW_S:
            child.recent_restarts.popleft()
        if child.reader is not None:
            child.reader.close()
            child.reader = None
        if error.fatal:  # a restart would meet the same full memory: the run ends with the one line
            self.failure = error
            return
        if len(child.recent_restarts) >= self.max_restarts:
            crashes = len(child.recent_restarts) + 1
            self.failure = ErrorRecord(
                error.source,
                f"{error.traceback.rstrip()}\n({child.spec.name} crashed {crashes} times "
                f"within {RESTART_WINDOW_S:g} s; the restart budget is {self.max_restarts})",
            )
            return
        child.recent_restarts.append(now)
        self.restarts += 1
        last_line = error.traceback.strip().splitlines()[-1] if error.traceback.strip() else reason
        print(
            f"warning: {child.spec.name} crashed ({last_line}); restarting it "
            f"({len(child.recent_restarts)}/{self.max_restarts} within {RESTART_WINDOW_S:g} s)",
            file=sys.stderr,
            flush=True,
        )
        self._start(child)

    def stop_all(self, deadline: Callable[[], float], join_s: float = 2.0) -> None:
        """After the stop flag is set: let children exit by themselves until ``deadline()`` (a monotonic time,
        re-read each tick so a Ctrl-C can shorten it), then terminate, then kill. Records are drained all
        along, so a child blocked on a full pipe can still exit."""
        started = [c for c in self.children if c.process is not None]
        while any(c.process.is_alive() for c in started) and time.monotonic() < deadline():
            self.poll(timeout=0.1, stopped=lambda: True)
        for signal_them in (lambda p: p.terminate(), lambda p: p.kill()):  # SIGTERM first, then SIGKILL
            alive = [c.process for c in started if c.process.is_alive()]
            for process in alive:
                signal_them(process)
            until = time.monotonic() + join_s  # one deadline for all of them, not join_s each
            while any(p.is_alive() for p in alive) and time.monotonic() < until:
                wait([p.sentinel for p in alive if p.is_alive()], timeout=0.1)
        for child in started:
            child.process.join(timeout=join_s)
        for child in started:
            self._receive(child, None)
            if child.reader is not None:
                child.reader.close()
                child.reader = None
