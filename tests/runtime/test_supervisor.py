"""The supervisor's pipes: records of any size arrive whole, and a child stopped in the middle of writing one
cannot block the trainer (it is found hung by its heartbeat, killed and restarted)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import struct
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from a3c.runtime.context import child_context
from a3c.runtime.pipe import RecordReader
from a3c.runtime.shared import Heartbeats, StopReason, StopSignal
from a3c.runtime.supervisor import ChildSpec, Supervisor
from tests._supervised_child import payload, send_records

LARGE = [
    3 << 20,
    10,
    200_000,
    65_536,
    16_385,
    16_384,
    1,
]  # around Connection's 16 KiB split and the pipe size


def read_all(reader: RecordReader, count: int, timeout: float = 30.0) -> list:
    """``count`` records from ``reader``, waiting on its fd between reads (as Supervisor.poll does)."""
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records within {timeout} s"
        got, record = reader.next()
        if got:
            records.append(record)
        else:
            multiprocessing.connection.wait([reader], timeout=0.5)
    return records


def test_records_of_every_size_arrive_whole_and_in_order():
    read_end, write_end = multiprocessing.Pipe(duplex=False)
    reader = RecordReader(read_end)
    sent = [(0, i, payload(0, i, size)) for i, size in enumerate(LARGE)]
    writer = threading.Thread(target=lambda: [write_end.send(r) for r in sent], daemon=True)
    writer.start()
    try:
        assert read_all(reader, len(sent)) == sent
    finally:
        writer.join(timeout=30)
        write_end.close()
    assert not writer.is_alive()
    with pytest.raises(EOFError):
        reader.next()
    reader.close()


def next_now(reader: RecordReader, write_end: Connection) -> tuple[bool, Any]:
    """``reader.next()``, which must return at once; should it block, a watchdog ends the pipe after 5 s (the
    blocked read then fails) so that the test fails instead of hanging."""
    watchdog = threading.Timer(5.0, write_end.close)
    watchdog.start()
    try:
        result = reader.next()
    except (EOFError, OSError):
        result = None
    finally:
        watchdog.cancel()
        watchdog.join(timeout=10)
    assert not write_end.closed, "next() blocked on a half-written record"
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
    rest = threading.Thread(target=os.write, args=(write_end.fileno(), frame[60_000:] + long_frame))
    rest.start()  # more than the pipe holds: written while the reader reads
    assert read_all(reader, 2) == [("a", b"x" * 100_000)] * 2
    rest.join(timeout=30)
    assert not rest.is_alive()
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


def poll_within(supervisor: Supervisor, timeout: float, stop: StopSignal, limit: float) -> None:
    """One ``supervisor.poll(timeout)``, which must return within ``limit`` seconds. It runs in the main
    thread (a restart installs signal handlers); should it block on a pipe, a watchdog SIGKILLs the stopped
    children after ``limit`` s (their pipes then end) so that the test fails instead of hanging."""
    rescued = threading.Event()

    def rescue() -> None:
        rescued.set()
        for child in supervisor.children:
            if child.process is not None and stopped_state(child.process.pid):
                child.process.kill()

    watchdog = threading.Timer(limit, rescue)
    started = time.monotonic()
    watchdog.start()
    try:
        supervisor.poll(timeout, stop.is_set)
    finally:
        watchdog.cancel()
        watchdog.join(timeout=10)
    assert not rescued.is_set(), f"poll({timeout}) blocked for {time.monotonic() - started:.1f} s"


def supervise(sizes: list[int], stop_mid_write_on_start: int | None, max_restarts: int, hang_timeout: float):
    heartbeats, stop, received = Heartbeats(1), StopSignal(), []

    def args(restart: int, writer) -> tuple:
        return (heartbeats, 0, writer, restart, stop, sizes, stop_mid_write_on_start)

    spec = ChildSpec("sender", 0, send_records, args)
    supervisor = Supervisor(child_context(), [spec], heartbeats, received.append, max_restarts, hang_timeout)
    return supervisor, stop, received


def until(condition: Callable[[], bool], timeout: float, step: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        step()


def finish(supervisor: Supervisor, stop: StopSignal) -> None:
    """Stop the children; if a poll is still blocked on a stopped child's pipe, SIGKILL frees it first."""
    for child in supervisor.children:
        if child.process is not None and stopped_state(child.process.pid):
            child.process.kill()
    stop.stop(StopReason.INTERRUPTED)
    supervisor.stop_all(lambda: time.monotonic() + 10.0)
    assert all(not c.process.is_alive() for c in supervisor.children)


@pytest.mark.slow
def test_a_large_record_from_a_real_child_arrives_whole():
    supervisor, stop, received = supervise(LARGE, None, max_restarts=0, hang_timeout=30.0)
    try:
        supervisor.start_all()
        step = lambda: poll_within(supervisor, 0.5, stop, limit=10.0)  # noqa: E731
        until(lambda: len(received) == len(LARGE) or supervisor.failure is not None, 120.0, step)
        assert supervisor.failure is None and supervisor.restarts == 0
        assert received == [(0, i, payload(0, i, size)) for i, size in enumerate(LARGE)]
    finally:
        finish(supervisor, stop)


@pytest.mark.slow
def test_a_child_stopped_mid_record_is_killed_as_hung_and_restarted():
    sizes = [1 << 20, 10]  # a record 16 times the pipe's size: its writer is stopped inside the write
    supervisor, stop, received = supervise(sizes, 0, max_restarts=1, hang_timeout=1.0)
    try:
        supervisor.start_all()
        first = supervisor.children[0].process
        until(lambda: stopped_state(first.pid), 120.0, lambda: first.join(timeout=0.01))
        assert first.is_alive()
        step = lambda: poll_within(supervisor, 0.2, stop, limit=5.0)  # noqa: E731
        until(lambda: len(received) == len(sizes) or supervisor.failure is not None, 120.0, step)
        assert supervisor.failure is None and supervisor.restarts == 1
        assert first.exitcode == -signal.SIGKILL
        # Nothing of the half-written record, all of the restarted child's records, whole.
        assert received == [(1, i, payload(1, i, size)) for i, size in enumerate(sizes)]
    finally:
        finish(supervisor, stop)
