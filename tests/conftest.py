"""The fixtures every test may use (``run_dir``, ``token``), the leak check every test, module and the session
gets (tests/support/leaks.py), the ``--learning`` switch and how `make test` schedules the suite. What
the tests share (running ``a3c``, probing processes, the small envs) is in tests/support/."""

from __future__ import annotations

import atexit
import multiprocessing.resource_tracker
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from a3c.runtime.context import ONE_THREAD

# One thread per math library in the test processes too, as in every a3c child, set before torch or numpy
# is imported: up to three pytest processes share 2 cores, and a thread pool beside a busy process spins
# (docs/testing.md: the unit tests of tests/algo and tests/envs took 37 CPU-s on two threads, 19 on one).
os.environ.update(ONE_THREAD)

# The helpers' own asserts report their values as a test's do.
pytest.register_assert_rewrite("tests.support")

from tests.support.leaks import no_leaks  # noqa: E402 - after the rewrite is registered


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


@pytest.fixture
def token(_no_leaks_in_test: str) -> str:
    """The test's token: every process the test starts carries it in its environment (``A3C_TEST_TOKEN``),
    and after the test none of them may still be alive, wherever it was re-parented (``no_leaks``)."""
    return _no_leaks_in_test


# -- leak check: every test, every module, the session ------------------------------------------------------


@pytest.fixture(autouse=True, scope="session")
def _no_leaks_in_session(request: pytest.FixtureRequest) -> Iterator[str]:
    """Session-scoped fixtures (and whatever the whole run starts) leave nothing behind either. The session's
    multiprocessing forkserver and resource tracker start here, under the session's token: started inside a
    test, they and every child forked from them later would carry that test's token instead. The forkserver
    imports torch (2-3 CPU-s), so only a session with slow tests, the ones that start processes, starts it
    here. A unit test that needed it would start it with its own token and environment, kept for the rest
    of the session: mark such a test slow (every test that starts processes is)."""
    from a3c.runtime.context import start_early

    with no_leaks("session") as token:
        if any(item.get_closest_marker("slow") for item in request.session.items):
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


@pytest.fixture(autouse=True, scope="session")
def _assert_close_without_dtensor() -> None:
    """torch.testing.assert_close imports torch.distributed.tensor on its first call (1 CPU-s a process),
    only to handle DTensor inputs, which no test has: told that torch.distributed is unavailable, it skips
    that. (Where collecting imported torch, as in every run of more than a few modules; never imports it.)"""
    comparison = sys.modules.get("torch.testing._comparison")
    if comparison is not None and hasattr(comparison, "_HAS_DTENSOR"):
        comparison._HAS_DTENSOR = False


# -- make test-learning: multi-process learning curves, over seeds, with a pass rate per check ---------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--learning",
        action="store_true",
        help="also run the tests marked `learning` (tests/learning: multi-process runs that must reach a "
        "return within a wall-clock budget, one per seed); `make test-learning` runs them, CI does not",
    )


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker (not in a pytest the tests start, which inherits its environment): end the
    process at its last exit handler but those registered before this hook (multiprocessing's, which would
    only join children, and there are none: the session's leak check saw to that)."""
    if hasattr(config, "workerinput"):
        atexit.register(_end_worker_now, os.getpid())


def _end_worker_now(worker: int) -> None:
    """Everything a worker reports has been sent by its exit, and the interpreter's own teardown (collecting
    torch's, ale-py's and Ray's objects) took a second more, which the controlling pytest waited for. Only
    in the worker itself: a child forked from it exits as it would have."""
    if os.getpid() != worker:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# How `make test` (pytest-xdist, --dist loadfile) shares the suite between its pytest processes. A unit of
# work is a module, whose tests run in one process in order (a module-scoped fixture is made once), except
# that the modules below that start Ray clusters form one unit: run side by side on a loaded 2-core machine,
# their start-ups overran Ray's fixed 30-s wait for a node to register with its head.
# tests/test_schedule.py fails when a module that starts Ray is in neither the unit nor RAY_BESIDE_THE_UNIT.
RAY_UNIT = "the Ray backend's modules"
UNIT_OF_MODULE = {
    "tests/backends/test_ray_cluster.py": RAY_UNIT,
    "tests/backends/test_ray_nodes.py": RAY_UNIT,
}
# Modules that start Ray but run beside the unit, and why that is safe (a head of their own and no node that
# joins it would be: the 30-s wait is a joining node's).
RAY_BESIDE_THE_UNIT: dict[str, str] = {}
# The slowest units and their seconds (pytest's time per module, one `make test` on quiet cores). They are
# collected first, longest first, and handed out in that order (--no-loadscope-reorder), so the processes
# finish together; other modules follow in collection order. A stale figure costs balance, not correctness.
SLOWEST_UNITS_S = {
    RAY_UNIT: 268,
    "tests/envs/test_atari_vector.py": 61,
    "tests/api/test_notebook.py": 56,  # two notebooks: the API one, and extend.ipynb (a worker, MLflow)
    "tests/e2e/test_reliability.py": 47,
    "tests/e2e/test_train.py": 46,
    "tests/e2e/test_extras_smoke.py": 45,
    "tests/e2e/test_user_env.py": 41,  # a script that trains with 2 workers and MLflow, a serial learning run
    "tests/e2e/test_suspend_and_hangup.py": 40,
    "tests/e2e/test_many_workers.py": 34,
    "tests/e2e/test_tune.py": 29,
    "tests/tools/test_analysis.py": 28,
    "tests/e2e/test_export.py": 26,
    "tests/e2e/test_deterministic.py": 26,
    "tests/e2e/test_video.py": 23,
    "tests/algo/test_optim.py": 20,
    "tests/envs/test_atari_env.py": 17,
    "tests/e2e/test_spaces_learn.py": 15,
    "tests/tools/test_bench.py": 10,  # (its commands in-process)
    "tests/tools/test_race.py": 10,  # (its race in-process)
}


def module_of(nodeid: str) -> str:
    """A test's module: the part of its node id before ``::``."""
    return nodeid.split("::", 1)[0]


def scheduling_unit(nodeid: str) -> str:
    """The unit of `make test`'s scheduling a test belongs to: its module, or the module's group."""
    module = module_of(nodeid)
    return UNIT_OF_MODULE.get(module, module)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without the plugin, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadfile``: loadfile's scheduling by ``scheduling_unit`` (else None: xdist's own)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    if not callable(getattr(LoadFileScheduling, "_split_scope", None)):  # a private method of pytest-xdist's
        raise pytest.UsageError(
            "pytest-xdist has no LoadFileScheduling._split_scope, which make test's schedule overrides "
            "(tests/conftest.py); install the pinned version: pip install -e '.[dev]' -c constraints.txt"
        )

    class ByUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return ByUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--learning``, the learning curves are deselected: their pass condition is a race against
    the clock on a machine whose load is unknown, which `make test` must never depend on. The slowest
    units go first (SLOWEST_UNITS_S); the order within a unit is kept, but for the Ray head's modules."""
    if not config.getoption("--learning"):
        deselected = [item for item in items if item.get_closest_marker("learning")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker("learning")]
    # In the Ray unit, the modules that run on the shared head (tests/backends/conftest.py) go last, so that
    # it is started after the others and stopped with the unit.
    on_head = {module_of(item.nodeid) for item in items if "ray_head" in item.fixturenames}
    items.sort(
        key=lambda item: (
            -SLOWEST_UNITS_S.get(scheduling_unit(item.nodeid), 0),
            module_of(item.nodeid) in on_head,
        )
    )


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
