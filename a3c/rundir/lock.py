"""One writer per run dir: an exclusive ``flock`` on ``RUN_DIR/.a3c.lock``, held by the trainer for the life
of the run (``train``, ``--resume``, ``--force``). The kernel releases it when the process ends, however it
ends (SIGKILL included), so a dead run never blocks its resume; the file itself stays and means nothing.
The file holds the holder's PID, for the message a second writer gets."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from a3c.core.errors import BadInput

LOCK_NAME = ".a3c.lock"


def holder(run_dir: Path) -> int | None:
    """The PID of the live process that holds ``run_dir``'s lock (0 if it wrote none), or None when no
    process holds it (or there is no lock file)."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else 0
    finally:
        os.close(fd)  # also drops the shared lock a free file gave us
    return None


def refuse_if_held(run_dir: Path, option: str) -> None:
    """BadInput (one line naming ``option``) when a live a3c process writes ``run_dir``."""
    pid = holder(run_dir)
    if pid is not None:
        raise BadInput(
            f"{option}: {str(run_dir)!r} is in use by a running a3c (PID {pid or 'unknown'}); "
            "wait for it to end or stop it, then run this again"
        )


def lock_run_dir(run_dir: Path, option: str) -> int:
    """Take ``run_dir``'s lock for this process and return its file descriptor (close it to release); a run
    dir another live process holds is BadInput naming ``option``."""
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        refuse_if_held(run_dir, option)
        raise BadInput(f"{option}: {str(run_dir)!r} is in use by another a3c process") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def unlock(fd: int | None) -> None:
    """Release a lock ``lock_run_dir`` took (None: nothing to release); None, for the holder's variable."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
    return None
