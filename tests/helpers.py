"""Helpers for tests that run ``a3c`` as a real command (a subprocess with the repo on PYTHONPATH) or
in-process (``call_a3c``; ``call_a3c_train``, whose workers, if any, fork from the session's forkserver);
probes of processes and /dev/shm; and the guard for optional extras. The fixtures and the leak check every
test gets are tests/conftest.py's (tests/leaks.py)."""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


TOKEN_VAR = "A3C_TEST_TOKEN"


def a3c_env(token: str = "") -> dict[str, str]:
    """The environment of an ``a3c`` subprocess: the repo importable, and a token every child inherits
    (by default the current test's, which every process a test starts carries: see ``scope_token``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env[TOKEN_VAR] = token or os.environ.get(TOKEN_VAR, "")
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


def a3c_exit_code(*args: str) -> int:
    """``a3c ARGS`` in this process (its output where sys.stdout and sys.stderr point); its exit code."""
    from a3c.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


def call_a3c(*args: str) -> subprocess.CompletedProcess:
    """``a3c ARGS`` in this process, its output captured: what ``run_a3c`` returns, without an interpreter
    and torch to start (about 2 s of CPU each). For a command that changes no process-wide setting for
    good: ``evaluate`` without ``--video``, one refused before it starts anything, or ``train`` through
    ``call_a3c_train``. What a forked worker writes to its own stderr is not captured here."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = a3c_exit_code(*args)
    return subprocess.CompletedProcess(["a3c", *args], code, out.getvalue(), err.getvalue())


def run_serial_fixed_length(run_dir: Path, max_steps: int, token: str = "") -> subprocess.CompletedProcess:
    """A short ``--serial`` run on the FixedLength test env into ``run_dir``, to completion."""
    args = (
        f"train --env tests.testing_envs:FixedLength-v0 --serial --max-steps {max_steps} --eval-interval 0.2"
    )
    return run_a3c(*args.split(), "--quiet", "--run-dir", str(run_dir), timeout=120, token=token)


def popen_a3c(*args: str, token: str = "", prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start ``python -m a3c ARGS`` in its own session (so a test can signal it like a terminal would);
    ``prefix``: a command that runs it (e.g. ``timeout``)."""
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", "a3c", *args],
        cwd=ROOT,
        env=a3c_env(token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


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


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


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


def csv_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows, as dicts keyed by its header."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


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


def start_cartpole(
    run_dir, token, extra: str = "--target-return 1e9", max_seconds: int = 600
) -> subprocess.Popen:
    """A CartPole run, once its 3 children train. By default one that does not end by itself (its target is
    out of reach; ``max_seconds`` is a safety cap): the test ends it, once what it waits for has happened."""
    args = f"train --env CartPole-v1 --workers 2 --max-seconds {max_seconds} --quiet {extra}"
    proc = popen_a3c(*args.split(), "--run-dir", str(run_dir), token=token)
    wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") >= 20, timeout=120)
    wait_until(proc, lambda: len(spawned_children(proc.pid)) == 3, timeout=30)
    assert processes_with_token(token) >= spawned_children(proc.pid) | {proc.pid}  # the leak check sees them
    return proc


def kill_trainer(proc: subprocess.Popen, token: str) -> None:
    """SIGKILL the trainer alone, as a machine's OOM killer would, and assert none of its children outlives
    it: each sees its parent gone at its next heartbeat (milliseconds); 30 s is only a cap."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert not left_behind(token, timeout=30.0), "children outlived the SIGKILLed trainer"


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()


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


# -- optional extras ----------------------------------------------------------------------------------------

REQUIRE_EXTRAS_VAR = "A3C_REQUIRE_EXTRAS"  # .ci/run sets it: there every extra is installed (make test)


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of the optional ``extra`` and return it. Where it cannot be imported (missing, or
    broken: any error on import), skip with the install command; under ``A3C_REQUIRE_EXTRAS=1`` fail instead,
    so that CI, which installs every extra, cannot pass by silently skipping a family of tests.
    Works at module level (a whole test module) and inside a test."""
    try:
        return importlib.import_module(module)
    except Exception as error:  # a broken install raises more than ImportError (e.g. a missing shared lib)
        message = (
            f"the {extra} extra is not usable (import {module}: {type(error).__name__}: {error}); "
            f"install it: pip install -e '.[{extra}]' -c constraints.txt (make test installs it)"
        )
        if os.environ.get(REQUIRE_EXTRAS_VAR, "") not in ("", "0"):
            pytest.fail(f"{message}; {REQUIRE_EXTRAS_VAR} is set, so this fails instead of skipping", False)
        pytest.skip(message, allow_module_level=True)


def assert_continuous(path: Path, before_kill: list[dict[str, str]], step: int, wall: float) -> None:
    """global_step and wall_time never go back; the rows the checkpoint covers (global_step <= its step and
    wall_time <= its wall time) are exactly those logged before the kill (none lost, none twice), and every
    later row is new. Both bounds: an evaluation that pulled weights before the checkpoint may have finished
    after it, and its row is then dropped with the rest of what the killed process did later."""
    table = csv_rows(path)
    steps = [int(r["global_step"]) for r in table]
    walls = [float(r["wall_time"]) for r in table]
    assert steps == sorted(steps), f"{path.name}: global_step goes back"
    assert walls == sorted(walls), f"{path.name}: wall_time goes back"
    covered = [r for r in before_kill if int(r["global_step"]) <= step and float(r["wall_time"]) <= wall]
    assert table[: len(covered)] == covered, f"{path.name}: rows lost or doubled"
    assert all(float(r["wall_time"]) >= wall for r in table[len(covered) :]), f"{path.name}: an old row twice"


def train_serial_fixed_length(run_dir: Path, max_steps: int):
    """``run_serial_fixed_length``'s run in this process (``a3c.train``): the same run dir, without an
    interpreter and torch to start; its ``a3c.Run``, finished (exit 0)."""
    import a3c

    env_id = "tests.testing_envs:FixedLength-v0"
    run = a3c.train(env_id, run_dir=run_dir, serial=True, max_steps=max_steps, eval_interval=0.2)
    assert run.exit_code == 0, run.summary
    return run


def call_a3c_train(*args: str) -> subprocess.CompletedProcess:
    """``a3c train ARGS`` in this process (``call_a3c``): a serial run starts no process; a run with workers
    forks them from the session's forkserver (tests/conftest.py starts it under the session's token, so
    the session's leak check covers them). Its trainer sets torch's thread count (to one); the caller's is
    given back, as ``a3c.train`` does."""
    import torch

    threads = torch.get_num_threads()
    try:
        return call_a3c("train", *args)
    finally:
        torch.set_num_threads(threads)
