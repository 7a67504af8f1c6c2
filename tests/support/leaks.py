"""The leak check every test, module and the session gets (tests/conftest.py's autouse fixtures): no process
and no /dev/shm entry may be left behind. Each scope runs with its own token in the environment
(``A3C_TEST_TOKEN``), which every process it starts inherits, so a leaked grandchild is found by it even after
it was re-parented to init."""

from __future__ import annotations

import gc
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from tests.support.processes import (
    TOKEN_VAR,
    descendants,
    describe,
    process_parents,
    processes_with_token,
    shm_entries,
    shm_held_elsewhere,
)

# Only spent while something is left: a Ray cluster's daemons take up to 30 s to exit after ray.shutdown(),
# whichever scope started them.
LEAK_WAIT_S = {"function": 30.0, "module": 30.0, "session": 30.0}


def multiprocessing_helpers() -> set[int]:
    """This process's multiprocessing forkserver and resource tracker. Each is started once, by the session
    (tests/conftest.py), and serves the whole session (it exits with pytest): never a leak. The forkserver's
    children, the processes tests start through it, are checked like any other."""
    pids = {
        getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
        getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None),
    }
    return {pid for pid in pids if pid}


def all_pids() -> set[int]:
    """The PIDs in /proc: a snapshot cheap enough for every test (one directory listing)."""
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def new_processes(before: set[int]) -> set[int]:
    """Live descendants of this process started since ``before`` (``all_pids()`` then) and owned by the scope
    that took it: those whose ancestors up to this process are new too, this process itself, or a
    multiprocessing helper. One below a process that was already there (a Ray cluster's raylet starting
    worker processes, say) belongs to the wider scope that started that process, which checks it."""
    me, helpers = os.getpid(), multiprocessing_helpers()
    parents = process_parents()
    owned = set()
    for pid in descendants(me, parents) - before - helpers:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != me and (ancestor not in before or ancestor in helpers):
            ancestor = parents.get(ancestor)
        if ancestor == me:
            owned.add(pid)
    return owned


@contextmanager
def scope_token(value: str) -> Iterator[str]:
    """Set ``A3C_TEST_TOKEN`` to ``value`` in this process's environment for the block (then restore it):
    every process started inside it, and all of theirs, inherit the token."""
    previous = os.environ.get(TOKEN_VAR)
    os.environ[TOKEN_VAR] = value
    try:
        yield value
    finally:
        if previous is None:
            os.environ.pop(TOKEN_VAR, None)
        else:
            os.environ[TOKEN_VAR] = previous


def leaked(pids_before: set[int], token: str) -> set[int]:
    """Processes the scope left: new descendants of this process (``new_processes``), and every live process
    carrying the scope's ``token``, wherever it was re-parented (a killed command's grandchild, adopted by
    init), except this session's multiprocessing helpers, which carry the token of whichever scope started
    them. No new PID at all (most unit tests): nothing to look for, without reading every /proc/PID."""
    if not all_pids() - pids_before:
        return set()
    return new_processes(pids_before) | (processes_with_token(token) - multiprocessing_helpers())


@contextmanager
def no_leaks(scope: str) -> Iterator[str]:
    """Fail unless every process and /dev/shm entry that appears inside the block is gone at its end, after
    up to ``LEAK_WAIT_S[scope]`` s (garbage-collecting meanwhile: a semaphore is unlinked when its owner
    object is collected). Yields the scope's own token, set in the environment for the block. Costs two
    listings of /proc and of /dev/shm when no process was started; a PID reused within the block (of 32768,
    one that existed before it) would go unnoticed by the descendant check, not by the token's."""
    pids_before, shm_before = all_pids(), shm_entries()
    with scope_token(f"{scope}-{uuid.uuid4().hex}") as token:
        yield token
    deadline = time.monotonic() + LEAK_WAIT_S[scope]
    while True:
        processes = leaked(pids_before, token)
        shm = shm_entries() - shm_before
        if shm:
            shm -= shm_held_elsewhere(shm, processes)
        if not (processes or shm) or time.monotonic() > deadline:
            break
        gc.collect()
        time.sleep(0.05)  # polling a condition under a deadline
    problems = [f"processes left behind: {describe(processes)}"] if processes else []
    for pid in processes:  # so that the next test starts clean and is not blamed
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    problems += [f"left in /dev/shm: {sorted(shm)}"] if shm else []
    if problems:
        pytest.fail(f"after the {scope}: " + "; ".join(problems), pytrace=False)
