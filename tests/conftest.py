"""Helpers for tests that run ``a3c`` as a real command (a subprocess with the repo on PYTHONPATH) or, where
it starts nothing, in-process (``call_a3c``); the guard for optional extras; and the leak check every test
gets: no process and no /dev/shm segment left behind."""

from __future__ import annotations

import gc
import importlib
import io
import json
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout, suppress
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
    and torch to start (about 2 s of CPU each). Only for a command that starts no process and changes no
    process-wide setting: ``evaluate`` without ``--video``, or one refused before it starts anything."""
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


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


def shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


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


@pytest.fixture
def token(_no_leaks_in_test: str) -> str:
    """The test's token: every process the test starts carries it in its environment (``A3C_TEST_TOKEN``),
    and after the test none of them may still be alive, wherever it was re-parented (``no_leaks``)."""
    return _no_leaks_in_test


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


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()


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


# -- leak check: every test, every module, the session ------------------------------------------------------

# Only spent while something is left: a Ray cluster's daemons take up to 30 s to exit after ray.shutdown(),
# whichever scope started them.
LEAK_WAIT_S = {"function": 30.0, "module": 30.0, "session": 30.0}


def multiprocessing_helpers() -> set[int]:
    """This process's multiprocessing forkserver and resource tracker. Each is started once, by whichever
    test first needs it, and serves the whole session (it exits with pytest): never a leak. The forkserver's
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


@pytest.fixture(autouse=True, scope="session")
def _no_leaks_in_session() -> Iterator[str]:
    """Session-scoped fixtures (and whatever the whole run starts) leave nothing behind either. The session's
    multiprocessing forkserver and resource tracker start here, under the session's token: started inside a
    test, they and every child forked from them later would carry that test's token instead."""
    from a3c.runtime.context import start_early

    with no_leaks("session") as token:
        start_early()
        multiprocessing.resource_tracker.ensure_running()
        yield token


@pytest.fixture(autouse=True, scope="module")
def _no_leaks_in_module() -> Iterator[str]:
    """A module-scoped fixture's processes (a Ray cluster, say) may outlive each test but not the module;
    they carry the module's token. An autouse fixture is set up before the other fixtures of its scope and
    torn down after them."""
    with no_leaks("module") as token:
        yield token


@pytest.fixture(autouse=True)
def _no_leaks_in_test() -> Iterator[str]:
    """No test leaves a process or /dev/shm entry behind; the check runs after the test's other fixtures are
    torn down, and finds the test's processes by its token too, wherever they were re-parented."""
    with no_leaks("function") as token:
        yield token


# -- make test-learning: multi-process learning curves, over seeds, with a pass rate per check ---------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--learning",
        action="store_true",
        help="also run the tests marked `learning` (tests/learning: multi-process runs that must reach a "
        "return within a wall-clock budget, one per seed); `make test-learning` runs them, CI does not",
    )


# How `make test` (pytest-xdist, --dist loadfile) shares the suite between its pytest processes. A unit of
# work is a module, whose tests run in one process in order (a module-scoped fixture is made once), except
# that the modules below that start Ray clusters form one unit: run side by side on a loaded 2-core machine,
# their start-ups overran Ray's fixed 30-s wait for a node to register with its head.
RAY_UNIT = "the Ray backend's modules"
UNIT_OF_MODULE = {
    "tests/backends/test_ray.py": RAY_UNIT,
    "tests/backends/test_ray_cluster.py": RAY_UNIT,
    "tests/backends/test_ray_server_death.py": RAY_UNIT,
    "tests/front/test_server_load.py": RAY_UNIT,
}
# The slowest units and their seconds (pytest's time per module, one `make test` with a busy core). They are
# collected first, longest first, and handed out in that order (--no-loadscope-reorder), so the processes
# finish together; other modules follow in collection order. A stale figure costs balance, not correctness.
SLOWEST_UNITS_S = {
    RAY_UNIT: 349,
    "tests/e2e/test_extras_smoke.py": 89,
    "tests/e2e/test_reliability.py": 87,
    "tests/e2e/test_health_warnings.py": 85,
    "tests/e2e/test_spaces_learn.py": 85,
    "tests/e2e/test_video.py": 73,
    "tests/e2e/test_continuous.py": 69,
    "tests/envs/test_atari_vector.py": 69,
    "tests/front/test_analysis.py": 57,
    "tests/e2e/test_train.py": 50,
    "tests/front/test_bench.py": 35,
    "tests/e2e/test_export.py": 33,
    "tests/e2e/test_deterministic.py": 28,
    "tests/e2e/test_tune.py": 25,
    "tests/front/test_race.py": 21,
    "tests/runtime/test_shared.py": 19,
    "tests/e2e/test_cli_contract.py": 14,
}


def scheduling_unit(nodeid: str) -> str:
    """The unit of `make test`'s scheduling a test belongs to: its module, or the module's group."""
    module = nodeid.split("::", 1)[0]
    return UNIT_OF_MODULE.get(module, module)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without the plugin, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadfile``: loadfile's scheduling by ``scheduling_unit`` (else None: xdist's own)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return ByUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--learning``, the learning curves are deselected: their pass condition is a race against
    the clock on a machine whose load is unknown, which `make test` must never depend on. The slowest
    units go first (SLOWEST_UNITS_S); the order within a unit is kept."""
    if not config.getoption("--learning"):
        deselected = [item for item in items if item.get_closest_marker("learning")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker("learning")]
    items.sort(key=lambda item: -SLOWEST_UNITS_S.get(scheduling_unit(item.nodeid), 0))


SEED_ID = re.compile(r"-?seed\d+-?")


def check_name(nodeid: str) -> str:
    """A learning test's id without its seed: ``test_x[seed2-ray]`` -> ``test_x[ray]``."""
    name, _, params = nodeid.partition("[")
    params = SEED_ID.sub("-", params.rstrip("]")).strip("-")
    return f"{name}[{params}]" if params else name


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Under ``--learning``: each check's pass rate over its seeds, one line a check."""
    if not config.getoption("--learning"):
        return
    outcomes: dict[str, list[bool]] = {}
    for kind in ("passed", "failed"):
        for report in terminalreporter.stats.get(kind, []):
            if getattr(report, "when", None) == "call" and "learning" in report.keywords:
                outcomes.setdefault(check_name(report.nodeid), []).append(kind == "passed")
    if not outcomes:
        return
    terminalreporter.section("learning checks: pass rate over seeds")
    for name, results in sorted(outcomes.items()):
        terminalreporter.write_line(f"{sum(results)}/{len(results)} passed  {name}")
