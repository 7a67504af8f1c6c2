"""The supervisor's pipes: records of any size arrive whole, and a child stopped in the middle of writing one
cannot block the trainer (it is found hung by its heartbeat, killed and restarted)."""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from a3c.runtime.context import child_context
from a3c.runtime.counters import Heartbeats, StopReason, StopSignal
from a3c.runtime.pipe import RecordReader
from a3c.runtime.supervisor import ChildSpec, Supervisor
from tests.support.supervised_child import payload, send_records, stop_once_as_if_the_trainer_were_silent

LARGE = [
    3 << 20,
    10,
    200_000,
    65_536,
    16_385,
    16_384,
    1,
]  # around Connection's 16 KiB split and the pipe size


# A healthy child never goes this long without a beat within a test (pytest's own timeout, pyproject.toml),
# so no test here can find one hung by the real clock: a hang is made by moving the supervisor's clock on.
HANG_S = 600.0


def syscall_fields(tid: int) -> list[str]:
    """/proc/self/task/TID/syscall of a thread of this process: the number and arguments of the system call it
    is asleep in, or ["running"]."""
    return Path(f"/proc/self/task/{tid}/syscall").read_text().split()


@functools.cache
def read_number() -> str:
    """The number of read(2) as that file shows it, found by putting a thread to sleep in a read of a pipe of
    its own (no table of architectures)."""
    read_end, write_end = os.pipe()
    sleeper = threading.Thread(target=os.read, args=(read_end, 1), daemon=True)
    sleeper.start()
    try:
        while (fields := syscall_fields(sleeper.native_id))[1:2] != [hex(read_end)]:
            time.sleep(0.001)  # polling a condition: the thread is not in its read yet
        return fields[0]
    finally:
        os.write(write_end, b"x")
        sleeper.join()
        os.close(read_end)
        os.close(write_end)


@contextmanager
def block_watch(stuck: Callable[[], set[int]], rescue: Callable[[], None]) -> Iterator[threading.Event]:
    """An Event, set if meanwhile this thread falls asleep in a read of one of the fds ``stuck()`` names:
    pipes whose writer writes nothing more while it is watched (a stopped child, or this very thread). Such a
    read never returns: a block, seen as an event however slow the machine is. Then ``rescue()`` ends the
    writer, so that the read returns and the test fails instead of hanging."""
    tid, blocked, done = threading.get_native_id(), threading.Event(), threading.Event()

    def watch() -> None:
        while not done.wait(0.005):  # polling interval
            fds = stuck()
            fields = syscall_fields(tid)
            # stuck() again after: the fd is still that pipe's (a stopped child's reader is closed only after
            # the child is killed, and so no longer stopped)
            if fields[0] == read_number() and int(fields[1], 16) in fds & stuck():
                blocked.set()
                rescue()
                return

    read_number()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield blocked
    finally:
        done.set()
        watcher.join()


def read_all(reader: RecordReader, writer: threading.Thread) -> list:
    """Every record ``reader`` gets from ``writer``, a thread writing into its pipe: read until a read finds
    nothing more after the writer ended (then all it wrote has been read), waiting on the fd between reads as
    Supervisor.poll does. A record lost or torn is then a count or a value, not a timeout."""
    records: list = []
    while True:
        finished = not writer.is_alive()  # before the read: all it wrote is in the pipe by then
        got, record = reader.next()
        if got:
            records.append(record)
        elif finished:
            return records
        else:
            multiprocessing.connection.wait([reader], timeout=0.05)  # polling interval, while it writes


def test_records_of_every_size_arrive_whole_and_in_order():
    read_end, write_end = multiprocessing.Pipe(duplex=False)
    reader = RecordReader(read_end)
    sent = [(0, i, payload(0, i, size)) for i, size in enumerate(LARGE)]
    writer = threading.Thread(target=lambda: [write_end.send(r) for r in sent], daemon=True)
    writer.start()
    assert read_all(reader, writer) == sent
    write_end.close()
    with pytest.raises(EOFError):
        reader.next()
    reader.close()


def next_now(reader: RecordReader, write_end: Connection) -> tuple[bool, Any]:
    """``reader.next()``, which must return at once: the test's thread is its pipe's only writer, so should
    next() fall asleep reading it, it is blocked for good; a watcher then ends the pipe (the blocked read
    fails) and the test fails instead of hanging."""
    with block_watch(lambda: {reader.fd}, write_end.close) as blocked:
        try:
            result = reader.next()
        except (EOFError, OSError):
            result = None
    assert not blocked.is_set(), "next() blocked on a half-written record"
    return result


def test_a_half_written_record_never_blocks_and_is_dropped_at_eof():
    read_end, write_end = multiprocessing.Pipe(duplex=False)
    reader = RecordReader(read_end)
    whole = pickle.dumps(("a", b"x" * 100_000))
    frame = struct.pack("!i", len(whole)) + whole
    os.write(write_end.fileno(), frame[:1000])  # a writer stopped mid-record
    assert next_now(reader, write_end) == (False, None)
    assert not reader.pending()
    os.write(write_end.fileno(), frame[1000:60_000])
    assert next_now(reader, write_end) == (False, None)
    # The 8-byte length form Connection uses past 2 GiB, built by hand (sending 2 GiB would be too slow).
    long_frame = struct.pack("!i", -1) + struct.pack("!Q", len(whole)) + whole
    rest = threading.Thread(
        target=os.write, args=(write_end.fileno(), frame[60_000:] + long_frame), daemon=True
    )
    rest.start()  # more than the pipe holds: written while the reader reads
    assert read_all(reader, rest) == [("a", b"x" * 100_000)] * 2
    os.write(write_end.fileno(), frame[:5])  # half a record, then the writer dies
    write_end.close()
    with pytest.raises(EOFError):
        reader.next()
    reader.close()


def stopped_state(pid: int) -> bool:
    """Whether ``pid`` is stopped (state T in /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] == "T"


def stopped_readers(supervisor: Supervisor) -> set[int]:
    """The fds of the pipes of the supervisor's stopped children (a stopped child writes nothing more)."""
    fds = set()
    for child in supervisor.children:
        reader, process = child.reader, child.process
        if reader is not None and process is not None and stopped_state(process.pid):
            fds.add(reader.fd)
    return fds


def poll_unblocked(supervisor: Supervisor, timeout: float, stop: StopSignal) -> None:
    """One ``supervisor.poll(timeout)``, which must not block on the pipe of a stopped child. It runs in the
    main thread (a restart installs signal handlers); should it fall asleep reading such a pipe, a watcher
    SIGKILLs the stopped children (their pipes then end) so that the test fails instead of hanging."""

    def rescue() -> None:
        for child in supervisor.children:
            if child.process is not None and stopped_state(child.process.pid):
                child.process.kill()

    with block_watch(lambda: stopped_readers(supervisor), rescue) as blocked:
        supervisor.poll(timeout, stop.is_set)
    assert not blocked.is_set(), "poll() blocked on the pipe of a stopped child"


class MovableHeartbeats:
    """The supervisor's view of the heartbeats (its children beat the real ones) on a clock the test moves on:
    each age is the real one plus ``moved`` seconds."""

    def __init__(self, heartbeats: Heartbeats):
        self.heartbeats, self.moved = heartbeats, 0.0
        self.trainer, self.now, self.beat = heartbeats.trainer, heartbeats.now, heartbeats.beat

    def clear(self, slot: int) -> None:
        self.heartbeats.clear(slot)

    def age(self, slot: int) -> float | None:
        age = self.heartbeats.age(slot)
        return None if age is None else age + self.moved


def supervise(sizes: list[int], stop_mid_write_on_start: int | None, max_restarts: int):
    heartbeats, stop, received = Heartbeats(1), StopSignal(), []

    def kwargs(restart: int, writer) -> dict:
        return dict(
            heartbeats=heartbeats,
            slot=0,
            conn=writer,
            restart=restart,
            stop=stop,
            sizes=sizes,
            stop_mid_write_on_start=stop_mid_write_on_start,
        )

    spec = ChildSpec("sender", 0, send_records, kwargs)
    view = MovableHeartbeats(heartbeats)
    supervisor = Supervisor(child_context(), [spec], view, received.append, max_restarts, HANG_S)
    return supervisor, stop, received


def until(condition: Callable[[], bool], step: Callable[[], None]) -> None:
    """``step()`` until ``condition()``. No deadline: each condition here is met by a defect too (a child's
    failure, or its own end after LIFETIME_S), and pytest's timeout caps the rest."""
    while not condition():
        step()


def finish(supervisor: Supervisor, stop: StopSignal) -> None:
    """Stop the children; if a poll is still blocked on a stopped child's pipe, SIGKILL frees it first."""
    for child in supervisor.children:
        if child.process is not None and stopped_state(child.process.pid):
            child.process.kill()
    stop.stop(StopReason.INTERRUPTED)
    supervisor.stop_all(lambda: time.monotonic() + 10.0)  # then SIGTERM, then SIGKILL
    for child in supervisor.children:
        child.process.join()


@pytest.mark.slow
def test_a_large_record_from_a_real_child_arrives_whole():
    supervisor, stop, received = supervise(LARGE, None, max_restarts=0)
    try:
        supervisor.start_all()
        step = lambda: supervisor.poll(0.5, stop.is_set)  # noqa: E731
        until(lambda: len(received) == len(LARGE) or supervisor.failure is not None, step)
        assert supervisor.failure is None and supervisor.restarts == 0
        assert received == [(0, i, payload(0, i, size)) for i, size in enumerate(LARGE)]
    finally:
        finish(supervisor, stop)


@pytest.mark.slow
def test_a_child_stopped_mid_record_is_killed_as_hung_and_restarted(capsys):
    sizes = [1 << 20, 10]  # a record 16 times the pipe's size: its writer is stopped inside the write
    supervisor, stop, received = supervise(sizes, 0, max_restarts=1)
    clock = supervisor.heartbeats
    try:
        supervisor.start_all()
        first = supervisor.children[0].process
        until(lambda: stopped_state(first.pid) or first.exitcode is not None, lambda: first.join(0.01))
        assert first.is_alive()
        for _ in range(3):  # polls read what there is of the record and return; it is not hung yet
            poll_unblocked(supervisor, 0.05, stop)
        assert (supervisor.restarts, received, stopped_state(first.pid)) == (0, [], True)
        # Its clock moved past its hang timeout, with no beat since: the next poll kills and restarts it.
        clock.moved = HANG_S + 1.0
        poll_unblocked(supervisor, 0.05, stop)
        clock.moved = 0.0  # before the restarted child's first beat, which no poll has seen yet
        assert supervisor.restarts == 1 and first.exitcode == -signal.SIGKILL
        assert f"sender sent no heartbeat for {HANG_S:g} s and was killed" in capsys.readouterr().err
        step = lambda: supervisor.poll(0.2, stop.is_set)  # noqa: E731
        until(lambda: len(received) == len(sizes) or supervisor.failure is not None, step)
        assert supervisor.failure is None and supervisor.restarts == 1
        # Nothing of the half-written record, all of the restarted child's records, whole.
        assert received == [(1, i, payload(1, i, size)) for i, size in enumerate(sizes)]
    finally:
        finish(supervisor, stop)


@pytest.mark.slow
def test_a_child_that_stopped_for_a_silent_trainer_is_restarted_outside_the_restart_budget(capsys):
    heartbeats, stop, received = Heartbeats(1), StopSignal(), []
    kwargs = lambda restart, writer: dict(  # noqa: E731
        heartbeats=heartbeats, slot=0, conn=writer, restart=restart, stop=stop
    )
    spec = ChildSpec("sender", 0, stop_once_as_if_the_trainer_were_silent, kwargs)
    supervisor = Supervisor(child_context(), [spec], heartbeats, received.append, 0, HANG_S)  # no budget
    try:
        supervisor.start_all()
        step = lambda: supervisor.poll(0.2, stop.is_set)  # noqa: E731
        until(lambda: len(received) == 2 or supervisor.failure is not None, step)
        assert (supervisor.failure, supervisor.restarts, received) == (None, 1, [(0,), (1,)])
        assert "sender stopped while the trainer was silent; restarting it" in capsys.readouterr().err
    finally:
        finish(supervisor, stop)
