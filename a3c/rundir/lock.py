"""One writer per run dir: an exclusive ``flock`` on ``RUN_DIR/.a3c.lock``, held by the trainer for the life
of the run (``train``, ``--resume``, ``--force``). The kernel releases it when the process ends, however it
ends (SIGKILL included), so a dead run on this host never blocks its resume.

A flock alone is not enough where the kernel cannot see every writer: on NFS with local locks, or after a
lost lease (a job requeued on another node while the first still runs), a second host takes the same flock.
So the file names its owner, like a lease: its PID, host, kernel boot id, start time and lease in seconds,
the file's mtime renewed at every checkpoint (``still_held``). "Another host" is another kernel (boot id):
two containers of one machine share its flocks, two pods of one name on two nodes do not. A taker on
another host refuses while that lease is fresh; the holder, at each checkpoint, checks that the file at the
path is still the one it locked and still names it (deleted, replaced or taken over: it stops without
writing). A clean release marks the owner gone, so a requeue on another host starts at once; only a holder
that vanished makes it wait out the lease (so does this machine's own run after a reboot within it)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from a3c.core.errors import BadInput

LOCK_NAME = ".a3c.lock"
DEFAULT_LEASE_S = 600.0  # a3c tune's study dir and callers that name none; a run's is 3 checkpoint intervals
# A file system that cannot lock, or a run dir we may not write: one line, not a traceback.
UNLOCKABLE = {
    errno.ENOSYS: "its file system cannot lock files (flock); use a local disk or NFS with locking",
    errno.ENOLCK: "its file system has no locks to give (ENOLCK); use a local disk or NFS with locking",
    errno.EOPNOTSUPP: "its file system cannot lock files (flock); use a local disk or NFS with locking",
    errno.EROFS: "it is on a read-only file system",
    errno.EACCES: "it is not writable by this user",
    errno.EPERM: "it is not writable by this user",
}


@dataclass(frozen=True)
class Owner:
    """Who holds a lock file: the first line is the PID (what an older a3c wrote and reads), then
    ``key=value`` lines."""

    pid: int
    host: str = ""
    started: str = ""
    lease_s: float = DEFAULT_LEASE_S
    boot: str = ""  # the kernel's boot id: the flocks it keeps are this kernel's

    def text(self) -> str:
        """The file's contents."""
        fields = f"host={self.host}\nboot={self.boot}\nstarted={self.started}\nlease_s={self.lease_s:g}\n"
        return f"{self.pid}\n{fields}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a lock file names (None when it names none: empty, released, or not ours)."""
        lines = text.splitlines()
        if not lines or not lines[0].strip().isdigit():
            return None
        fields = dict(line.split("=", 1) for line in lines[1:] if "=" in line)
        try:
            lease = float(fields.get("lease_s", DEFAULT_LEASE_S))
        except ValueError:
            lease = DEFAULT_LEASE_S
        host, started, boot = fields.get("host", ""), fields.get("started", ""), fields.get("boot", "")
        return cls(int(lines[0]), host, started, lease, boot)

    def describe(self) -> str:
        """``PID 123`` (this host's), ``PID 123 on host node7`` (another's), for messages."""
        where = "" if self.here() else f" on host {self.host}"
        return f"PID {self.pid or 'unknown'}{where}"

    def here(self) -> bool:
        """Whether the owner runs on this kernel (its boot id, else its host name: an older file's)."""
        if self.boot and boot_id():
            return self.boot == boot_id()
        return not self.host or self.host == socket.gethostname()

    def is_us(self) -> bool:
        """Whether the owner is this process."""
        return self.pid == os.getpid() and self.here()


def boot_id() -> str:
    """This kernel's boot id ("" where the system does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def this_owner(lease_s: float = DEFAULT_LEASE_S) -> Owner:
    """This process as a lock's owner."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return Owner(os.getpid(), socket.gethostname(), started, lease_s, boot_id())


def _read(fd: int) -> Owner | None:
    return Owner.parse(os.pread(fd, 4096, 0).decode(errors="replace"))


def _fresh_lease_elsewhere(fd: int) -> tuple[Owner, float] | None:
    """(owner, seconds since its last renewal) when the file names a holder on another host whose lease
    has not run out: the kernel's flock cannot see that process (NFS with local locks, another node)."""
    owner = _read(fd)
    if owner is None or owner.here():
        return None  # on this kernel the flock is the truth: we got it, so its holder is gone
    age = time.time() - os.fstat(fd).st_mtime
    return (owner, age) if -60 < age < owner.lease_s else None  # a clock a minute ahead still counts


def holder(run_dir: Path) -> int | None:
    """The PID of the live process that holds ``run_dir``'s lock (0 if it wrote none), or None when no
    process holds it (or there is no lock file, or the file system cannot tell)."""
    found = holding_owner(run_dir)
    return None if found is None else found.pid


def holding_owner(run_dir: Path) -> Owner | None:
    """The owner of ``run_dir``'s lock while it is held (by flock here, or a fresh lease on another host)."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or Owner(0)
        except OSError:
            return None  # no locks here: lock_run_dir says so in its own line
        elsewhere = _fresh_lease_elsewhere(fd)
        return None if elsewhere is None else elsewhere[0]
    finally:
        os.close(fd)  # also drops the shared lock a free file gave us


def refuse_if_held(run_dir: Path, option: str) -> None:
    """BadInput (one line naming ``option``) when a live a3c process writes ``run_dir``."""
    owner = holding_owner(run_dir)
    if owner is not None:
        raise BadInput(
            f"{option}: {str(run_dir)!r} is in use by a running a3c ({owner.describe()}); "
            "wait for it to end or stop it, then run this again"
        )


def unlockable(run_dir: Path, option: str, exc: OSError) -> BadInput:
    """The one line for a run dir whose lock cannot be taken (no flock, read-only, not ours)."""
    why = UNLOCKABLE.get(exc.errno or 0, exc.strerror or str(exc))
    return BadInput(f"{option}: {str(run_dir)!r} cannot be locked for writing: {why}")


def lock_run_dir(run_dir: Path, option: str, lease_s: float = DEFAULT_LEASE_S) -> int:
    """Take ``run_dir``'s lock for this process and return its file descriptor (``unlock`` it to release);
    a run dir another live process holds (here, or on another host within its lease) is BadInput naming
    ``option``, and so is one whose file system cannot lock or that cannot be written."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno in UNLOCKABLE:
            raise unlockable(run_dir, option, exc) from None
        raise BadInput(f"{option}: {str(run_dir)!r} cannot be locked ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        elsewhere = _fresh_lease_elsewhere(fd)
        if elsewhere is not None:
            owner, age = elsewhere
            raise BadInput(
                f"{option}: {str(run_dir)!r} is in use by a3c {owner.describe()} (its lock renewed "
                f"{max(age, 0):.0f} s ago, lease {owner.lease_s:g} s); stop it, or if it is gone wait "
                f"{max(owner.lease_s - age, 0):.0f} s or delete {LOCK_NAME} there, then run this again"
            )
        text = this_owner(lease_s).text().encode()
        os.pwrite(fd, text, 0)  # over the old text, then cut: a full disk has no block to give a new one
        os.ftruncate(fd, len(text))
        os.fsync(fd)  # another host reads it through the file server
    except BlockingIOError:
        os.close(fd)
        refuse_if_held(run_dir, option)
        raise BadInput(f"{option}: {str(run_dir)!r} is in use by another a3c process") from None
    except OSError as exc:
        os.close(fd)
        raise unlockable(run_dir, option, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def still_held(run_dir: Path, fd: int) -> str | None:
    """None while ``fd`` is still ``run_dir``'s lock (the same file at the path, naming this process), its
    lease renewed; else why not, in words, for the one error line of a run that must stop writing."""
    path = run_dir / LOCK_NAME
    try:
        here, ours = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return f"its lock file {str(path)!r} was deleted, so another writer may have taken the run dir"
    except OSError as exc:
        return f"its lock file {str(path)!r} cannot be read ({exc.strerror or exc})"
    if (here.st_dev, here.st_ino) != (ours.st_dev, ours.st_ino):
        return f"its lock file {str(path)!r} was replaced, so another writer may have taken the run dir"
    owner = _read(fd)
    if owner is None or not owner.is_us():
        taker = owner.describe() if owner is not None else "an unknown writer"
        return f"its lock file {str(path)!r} was taken over by {taker}"
    with contextlib.suppress(OSError):
        os.utime(fd)  # the lease: a taker on another host waits while this is fresh
    return None


def unlock(fd: int | None) -> None:
    """Release a lock ``lock_run_dir`` took (None: nothing to release); None, for the holder's variable.
    The owner is cleared first while the file still names this process, so another host may take it: its
    PID line becomes ``-…`` (written in place: the file keeps its block for the next holder on a full
    disk)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            owner = _read(fd)
            if owner is not None and owner.is_us():
                os.pwrite(fd, b"-", 0)
        with contextlib.suppress(OSError):
            os.close(fd)
    return None
