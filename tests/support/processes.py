"""Probes of processes and /dev/shm: what a token's processes are, a process's descendants, what is left
behind after a test (the leak check every test gets is ``tests.support.leaks``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

TOKEN_VAR = "A3C_TEST_TOKEN"


def processes_with_token(token: str) -> set[int]:
    """Live (non-zombie) processes started under ``token`` (see ``a3c_env``): the command and its children."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:
            continue
    return alive(found)


def left_behind(token: str, timeout: float = 10.0) -> set[int]:
    """Processes of ``token`` still alive after up to ``timeout`` s. multiprocessing's resource tracker
    exits on its own only once it reads EOF from the dead trainer, so a short wait is part of the contract."""
    import time

    deadline = time.monotonic() + timeout
    while (left := processes_with_token(token)) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition under a deadline, not a guess at how long something takes
    return left


def process_parents() -> dict[int, int]:
    """PID -> parent PID of every live (non-zombie) process, read from /proc (about 1 ms: raw reads, as the
    leak check runs it twice per test)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            stat = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        state, ppid = stat[stat.rindex(b")") + 2 :].split(b" ", 2)[:2]
        if state != b"Z":
            parents[int(name)] = int(ppid)
    return parents


def descendants(pid: int, parents: dict[int, int] | None = None) -> set[int]:
    """PIDs of every live (non-zombie) descendant of ``pid``, read from /proc."""
    parents = process_parents() if parents is None else parents
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        frontier = [c for p in frontier for c in children.get(p, ()) if c not in found]
        found.update(frontier)
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (zombies count as gone)."""
    live = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":
            live.add(pid)
    return live


def shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def shm_held_elsewhere(names: set[str], mine: set[int]) -> set[str]:
    """Those of ``names`` (in /dev/shm) that a live process other than this one and ``mine`` has open or
    mapped: in use by a wider scope's process or another test session on this machine, so not leaked."""
    paths = {f"/dev/shm/{name}": name for name in names}
    held: set[str] = set()
    for pid in set(process_parents()) - mine - {os.getpid()}:
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        held |= {name for path, name in paths.items() if path in links or path in maps}
    return held


def shm_left(before: set[str], timeout: float = 10.0) -> set[str]:
    """New /dev/shm entries (shared-memory segments, semaphores) still there after up to ``timeout`` s,
    except those another live process holds (the other pytest process's tests, say: see ``no_leaks``)."""
    deadline = time.monotonic() + timeout
    while True:
        new = shm_entries() - before
        if new:
            new -= shm_held_elsewhere(new, set())
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.05)  # the resource tracker unlinks what a killed trainer left, once it sees EOF


def spawned_children(pid: int) -> set[int]:
    """The trainer's workers and evaluator: its descendants named ``a3c-worker-N`` / ``a3c-evaluator`` (they
    are forks of the forkserver below the trainer; not the forkserver itself or the resource tracker)."""
    found = set()
    for child in descendants(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().startswith("a3c-"):
                found.add(child)
        except OSError:
            continue
    return found


def describe(pids: set[int]) -> str:
    """PIDs with their command lines, for a readable failure."""
    parts = []
    for pid in sorted(pids):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = "?"
        parts.append(f"{pid} ({command.strip()[:120]})")
    return ", ".join(parts)
