"""The one child-process shell: what every child does first, how it learns that it should exit on its own,
and how it ends (a traceback to the trainer and exit 1, or a quiet exit 0 when the trainer is gone).

A child never outlives its trainer, nor trains on under a hung one. Its parent is the forkserver, not the
trainer; the forkserver exits as soon as the trainer is gone (it reads EOF on the pipe only the trainer
holds open, whatever killed the trainer) and ignores the signals a terminal or a scheduler sends the group
(``a3c.runtime.server``), so ``PR_SET_PDEATHSIG`` with SIGKILL on the forkserver is SIGKILL on the
trainer's death: as Ray kills its workers with their raylet, even one stuck in an env step that never
comes back to ``should_exit``. A trainer that lives but stops beating (a write stuck on NFS) is noticed
at the child's next ``should_exit``: silent for its ``hang_timeout``, counted as the trainer counts the
children's (``SilenceWatch``), it makes the child stop; the trainer restarts it if it comes back."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing.util
import os
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing import forkserver
from multiprocessing.connection import Connection

import torch

from a3c.core.devices import out_of_memory_line
from a3c.core.records import ErrorRecord
from a3c.runtime.counters import Heartbeats
from a3c.runtime.silence import SilenceWatch

PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15  # prctl(2) options
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a scheduler's stop, a dropped ssh session's hangup
# The exit code of a child that stopped because the trainer was silent (EX_TEMPFAIL): no crash of its own, so
# its restart is not held against the restart budget (a trainer slow in a long callback or write is no fault).
TRAINER_LOST = 75


class ChildGuard:
    """Set up a spawned child and watch for reasons to exit that do not come through the stop flag.

    On creation: ``torch.set_num_threads(1)`` (invariant 3); killed when its parent dies
    (``PR_SET_PDEATHSIG``); SIGINT ignored (the trainer handles Ctrl-C and stops children through the stop
    flag); SIGTERM and SIGHUP recorded, so that such a signal sent to the whole process group (``timeout``,
    a batch scheduler, a closed terminal) ends the child at its next update instead of killing it
    mid-write. ``should_exit()`` is also true once the parent is gone (no orphan trains on) or the trainer
    has been silent for ``trainer_timeout`` seconds (None: not watched), and each call is a heartbeat: a
    child that stops calling it is seen as hung by the trainer.
    """

    def __init__(
        self,
        heartbeats: Heartbeats,
        slot: int,
        name: str,
        trainer_timeout: float | None = None,
        hangup_ignored: bool = False,
    ):
        torch.set_num_threads(1)
        set_process_name(name)
        self.parent_pid = os.getppid()
        leave_forkserver()
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in STOP_SIGNALS:
            ignored = signum == signal.SIGHUP and hangup_ignored  # the trainer runs under nohup: so do we
            signal.signal(signum, signal.SIG_IGN if ignored else self._on_stop_signal)
        self.terminated = False
        self.heartbeats = heartbeats
        self.slot, self.name = slot, name
        self.trainer_timeout = trainer_timeout
        self.started_at = heartbeats.now()
        self.trainer_watch = SilenceWatch(self.started_at)
        self.trainer_lost = False
        self.cleanups: list[Callable[[], None]] = []  # run_child calls them at exit, newest first

    def _on_stop_signal(self, _signum, _frame) -> None:
        self.terminated = True

    def should_exit(self) -> bool:
        """Beat this child's heartbeat; true once a SIGTERM or SIGHUP arrived, the parent is gone (also if it
        died just before ``PR_SET_PDEATHSIG`` was set) or the trainer is silent."""
        self.heartbeats.beat(self.slot)
        return self.terminated or os.getppid() != self.parent_pid or self._trainer_silent()

    def _trainer_silent(self) -> bool:
        """True (for good, with one line on stderr) once the trainer's heartbeat has been silent for
        ``trainer_timeout`` seconds of this child's own running time."""
        if self.trainer_timeout is None or self.trainer_lost:
            return self.trainer_lost
        now = self.heartbeats.now()
        self.trainer_watch.passed(now, 0.0)
        age = self.heartbeats.age(self.heartbeats.trainer)
        silence = self.trainer_watch.silence(0, age, self.started_at, now)
        if silence > self.trainer_timeout:
            self.trainer_lost = True
            print(
                f"warning: {self.name}: the trainer sent no heartbeat for {self.trainer_timeout:g} s; "
                "stopping (it restarts this process if it comes back)",
                file=sys.stderr,
                flush=True,
            )
        return self.trainer_lost


def leave_forkserver() -> None:
    """Close this child's copy of the forkserver's "alive" pipe (multiprocessing hands one to every child, so
    that it could start processes of its own): the server ends once nobody holds it, and it must end with the
    trainer, not wait for children that only its death kills (``PR_SET_PDEATHSIG``). A child starts no
    processes through the forkserver."""
    server = forkserver._forkserver
    if server._forkserver_alive_fd is not None:  # None: not a forkserver child
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None


def prctl(option: int, value: int | bytes) -> None:
    """prctl(2) where there is one (Linux); elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)


def set_process_name(name: str) -> None:
    """Name this process for ps and top (Linux /proc/PID/comm, 15 bytes), e.g. "a3c-worker-0"."""
    prctl(PR_SET_NAME, name.encode()[:15])


def release_arguments() -> None:
    """Drop this child's references to what it was started with (the Process object's target and arguments)
    and collect them: shared CUDA tensors among them are released to the process that made them."""
    process = multiprocessing.current_process()
    for name, empty in (("_target", None), ("_args", ()), ("_kwargs", {})):
        if hasattr(process, name):
            setattr(process, name, empty)
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
    trainer_timeout: float | None = None,
    hangup_ignored: bool = False,
) -> None:
    """Run ``body(guard)`` as a child process named ``a3c-<source>``: the guard is set up first (one thread,
    signals, heartbeat slot ``slot``); a closed pipe means the trainer is gone (exit 0: nobody to report to,
    nobody to train for); any other error sends ``ErrorRecord(source, traceback)`` and exits 1. What ``body``
    registers on ``guard.cleanups`` runs at the end either way. ``trainer_timeout``: the trainer's silence
    after which the child stops (the run's ``hang_timeout``); ``hangup_ignored``: SIGHUP stays ignored
    (the trainer's own, under ``nohup``). A child that stopped for a silent trainer exits ``TRAINER_LOST``."""
    guard = ChildGuard(heartbeats, slot, "a3c-" + source.replace(" ", "-"), trainer_timeout, hangup_ignored)
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
    if guard.trainer_lost:
        sys.exit(TRAINER_LOST)
