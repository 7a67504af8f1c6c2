"""The one child-process shell: what every child does first, how it learns that it should exit on its own,
and how it ends (a traceback to the trainer and exit 1, or a quiet exit 0 when the trainer is gone)."""

from __future__ import annotations

import ctypes
import gc
import multiprocessing.util
import os
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

import torch

from a3c.core.devices import out_of_memory_line
from a3c.core.records import ErrorRecord
from a3c.runtime.counters import Heartbeats


class ChildGuard:
    """Set up a spawned child and watch for reasons to exit that do not come through the stop flag.

    On creation: ``torch.set_num_threads(1)`` (invariant 3); SIGINT ignored (the trainer handles
    Ctrl-C and stops children through the stop flag); SIGTERM recorded, so that a SIGTERM sent to the whole
    process group (as ``timeout`` or a batch scheduler do) ends the child at its next update instead of
    killing it mid-write. ``should_exit()`` is also true once the parent is gone (no orphan trains on), and
    each call is a heartbeat: a child that stops calling it is seen as hung by the trainer.
    """

    def __init__(self, heartbeats: Heartbeats, slot: int, name: str):
        torch.set_num_threads(1)
        set_process_name(name)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self.parent_pid = os.getppid()
        self.terminated = False
        self.heartbeats = heartbeats
        self.slot = slot
        self.cleanups: list[Callable[[], None]] = []  # run_child calls them at exit, newest first

    def _on_sigterm(self, _signum, _frame) -> None:
        self.terminated = True

    def should_exit(self) -> bool:
        """Beat this child's heartbeat; true once a SIGTERM arrived or the parent is gone."""
        self.heartbeats.beat(self.slot)
        return self.terminated or os.getppid() != self.parent_pid


def set_process_name(name: str) -> None:
    """Name this process for ps and top (Linux /proc/PID/comm, 15 bytes), e.g. "a3c-worker-0"."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


def release_arguments() -> None:
    """Drop this child's references to what it was started with (the Process object's target and arguments)
    and collect them: shared CUDA tensors among them are released to the process that made them."""
    process = multiprocessing.current_process()
    for name in ("_target", "_args", "_kwargs"):
        if hasattr(process, name):
            setattr(process, name, None if name == "_target" else () if name == "_args" else {})
    gc.collect()


def format_error(traceback_text: str, limit: int = 3000) -> str:
    """The tail of a traceback (at most ``limit`` UTF-8 bytes), short enough that its message is one atomic
    pipe write (< 4 KiB): a child killed right after a failure still delivers it whole. (A half record never
    blocks the trainer, which decodes only whole records: a3c/runtime/pipe.py RecordReader.)"""
    data = traceback_text.encode()
    if len(data) <= limit:
        return traceback_text
    return "...\n" + data[-limit:].decode(errors="ignore")  # bytes, not characters: UTF-8 may take 4 each


def run_child(
    source: str,
    heartbeats: Heartbeats,
    slot: int,
    conn: Connection,
    body: Callable[[ChildGuard], None],
) -> None:
    """Run ``body(guard)`` as a child process named ``a3c-<source>``: the guard is set up first (one thread,
    signals, heartbeat slot ``slot``); a closed pipe means the trainer is gone (exit 0: nobody to report to,
    nobody to train for); any other error sends ``ErrorRecord(source, traceback)`` and exits 1. What ``body``
    registers on ``guard.cleanups`` runs at the end either way."""
    guard = ChildGuard(heartbeats, slot, "a3c-" + source.replace(" ", "-"))
    # Run by multiprocessing at this process's exit, once the target has returned: without it the shared
    # state it was given stays referenced until os._exit, and the trainer's CUDA blocks would count as still
    # in use by this process (torch's CUDA IPC reference counts; docs/gpu.md).
    multiprocessing.util.Finalize(None, release_arguments, exitpriority=100)
    try:
        body(guard)
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(0)
    except BaseException as exc:
        line = out_of_memory_line(exc)
        error = format_error(traceback.format_exc()) if line is None else line
        conn.send(ErrorRecord(source, error, fatal=line is not None))
        sys.exit(1)
    finally:
        for cleanup in reversed(guard.cleanups):
            cleanup()
