"""Process targets for tests/runtime/test_supervisor.py: they run in children of the forkserver, so they live
in a module of their own (a test module's functions would drag pytest into the child)."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import struct
import termios
import threading
import time
from multiprocessing.connection import Connection

from a3c.runtime.counters import Heartbeats, StopSignal

LIFETIME_S = 120.0  # a child outliving its test by this much exits on its own


def payload(restart: int, index: int, size: int) -> bytes:
    """Bytes the test can check: any lost, doubled or shifted chunk changes them."""
    return random.Random(restart * 1000 + index).randbytes(size)


def bytes_in_pipe(fd: int) -> int:
    """How many bytes sit unread in the pipe of ``fd`` (FIONREAD works on either end of a Linux pipe)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def stop_myself_once_bytes_are_in(fd: int) -> None:
    """SIGSTOP this process as soon as part of a record is in the pipe: the main thread is then inside its
    write (the record is larger than the pipe, and nobody reads it yet), and stays there."""
    deadline = time.monotonic() + LIFETIME_S
    while bytes_in_pipe(fd) == 0 and time.monotonic() < deadline:
        time.sleep(0.001)  # polling a condition under a deadline
    os.kill(os.getpid(), signal.SIGSTOP)


def send_records(
    heartbeats: Heartbeats,
    slot: int,
    conn: Connection,
    restart: int,
    stop: StopSignal,
    sizes: list[int],
    stop_mid_write_on_start: int | None,
) -> None:
    """Beat, send one record ``(restart, i, payload)`` per size, then keep beating until ``stop`` is set.

    On start number ``stop_mid_write_on_start`` the child stops itself (SIGSTOP) in the middle of writing its
    first record, as a debugger or a job-control stop would: it neither finishes the record nor beats again.
    """
    heartbeats.beat(slot)
    if restart == stop_mid_write_on_start:
        threading.Thread(target=stop_myself_once_bytes_are_in, args=(conn.fileno(),), daemon=True).start()
    for index, size in enumerate(sizes):
        conn.send((restart, index, payload(restart, index, size)))
    deadline = time.monotonic() + LIFETIME_S
    while not stop.is_set() and time.monotonic() < deadline:
        heartbeats.beat(slot)
        time.sleep(StopSignal.POLL_S)  # how a real child polls the stop flag


def stop_once_as_if_the_trainer_were_silent(
    heartbeats: Heartbeats, slot: int, conn: Connection, restart: int, stop: StopSignal
) -> None:
    """Send ``(restart,)``; on the first start then exit as a child does that found its trainer silent
    (``TRAINER_LOST``), on later ones beat until ``stop`` is set."""
    from a3c.runtime.child import TRAINER_LOST

    heartbeats.beat(slot)
    conn.send((restart,))
    if restart == 0:
        conn.close()
        os._exit(TRAINER_LOST)
    deadline = time.monotonic() + LIFETIME_S
    while not stop.is_set() and time.monotonic() < deadline:
        heartbeats.beat(slot)
        time.sleep(StopSignal.POLL_S)  # how a real child polls the stop flag
