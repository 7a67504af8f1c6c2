"""Helpers for tests that run ``a3c`` as a real command: a subprocess with the repo on PYTHONPATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


TOKEN_VAR = "A3C_TEST_TOKEN"


def a3c_env(token: str = "") -> dict[str, str]:
    """The environment of an ``a3c`` subprocess: the repo importable, and a token every child inherits."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env[TOKEN_VAR] = token
    return env


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


def run_a3c(*args: str, timeout: float = 300, token: str = "") -> subprocess.CompletedProcess:
    """Run ``python -m a3c ARGS`` to completion (under a timeout) and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "a3c", *args],
        cwd=ROOT,
        env=a3c_env(token),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def popen_a3c(*args: str, token: str = "") -> subprocess.Popen:
    """Start ``python -m a3c ARGS`` in its own session (so a test can signal it like a terminal would)."""
    return subprocess.Popen(
        [sys.executable, "-m", "a3c", *args],
        cwd=ROOT,
        env=a3c_env(token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def descendants(pid: int) -> set[int]:
    """PIDs of every live (non-zombie) descendant of ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
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


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


def shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def shm_left(before: set[str], timeout: float = 10.0) -> set[str]:
    """New /dev/shm entries (shared-memory segments, semaphores) still there after up to ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while (new := shm_entries() - before) and time.monotonic() < deadline:
        time.sleep(0.05)  # the resource tracker unlinks what a killed trainer left, once it sees EOF
    return new


@pytest.fixture
def token(request) -> str:
    """A token for the test's ``a3c`` processes; after the test none of them may still be alive."""
    import uuid

    value = uuid.uuid4().hex
    shm_before = shm_entries()
    yield value
    left = left_behind(value)
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"processes left behind: {sorted(left)}"
    assert not shm_left(shm_before), f"left in /dev/shm: {sorted(shm_left(shm_before))}"


def wait_until(proc: subprocess.Popen, condition, timeout: float) -> None:
    """Block until ``condition()`` holds, checking every 50 ms; fail if ``proc`` exits or time runs out."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        try:
            code = proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"a3c exited with {code} before the condition held\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")


def data_rows(path: Path) -> int:
    """Rows after the header of a CSV file (0 when it does not exist yet)."""
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except OSError:
        return 0


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


def start_cartpole(run_dir, token, extra: str = "--target-return 1e9") -> subprocess.Popen:
    """A CartPole run (by default one that will not end by itself for minutes), once its 3 children train."""
    args = f"train --env CartPole-v1 --workers 2 --max-seconds 300 --quiet {extra}"
    proc = popen_a3c(*args.split(), "--run-dir", str(run_dir), token=token)
    wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") >= 20, timeout=120)
    wait_until(proc, lambda: len(spawned_children(proc.pid)) == 3, timeout=30)
    assert processes_with_token(token) >= spawned_children(proc.pid) | {proc.pid}  # the leak check sees them
    return proc


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()
