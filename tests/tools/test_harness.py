"""The test harness itself (tests/support/extras.py, tests/support/leaks.py): the guard for optional extras
skips locally and fails in CI, and the leak check every test runs under catches a left process or /dev/shm
entry, at the right scope."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.commands import a3c_env
from tests.support.extras import REQUIRE_EXTRAS_VAR, require_extra
from tests.support.leaks import LEAK_WAIT_S, no_leaks
from tests.support.processes import descendants

MISSING = "a3c_test_missing_extra"
OUTCOMES = (pytest.fail.Exception, pytest.skip.Exception)


def test_require_extra_returns_an_importable_module(monkeypatch):
    monkeypatch.setenv(REQUIRE_EXTRAS_VAR, "1")
    assert require_extra("json", "json") is json


@pytest.mark.parametrize("required", ["", "0", "1"])
def test_a_missing_extra_skips_locally_and_fails_in_ci(monkeypatch, required):
    monkeypatch.setitem(sys.modules, MISSING, None)  # makes ``import a3c_test_missing_extra`` fail
    monkeypatch.setenv(REQUIRE_EXTRAS_VAR, required)
    outcome = pytest.fail.Exception if required == "1" else pytest.skip.Exception
    with pytest.raises(OUTCOMES) as raised:  # both: a wrong one fails this test instead of skipping it
        require_extra(MISSING, "atari")
    assert raised.type is outcome
    assert "pip install -e '.[atari]'" in str(raised.value)


def test_a_broken_extra_fails_in_ci(monkeypatch, tmp_path):
    (tmp_path / f"{MISSING}.py").write_text("raise RuntimeError('libfoo.so: cannot open shared object')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MISSING, raising=False)
    monkeypatch.setenv(REQUIRE_EXTRAS_VAR, "1")
    with pytest.raises(OUTCOMES, match="RuntimeError: libfoo.so") as raised:
        require_extra(MISSING, "mujoco")
    assert raised.type is pytest.fail.Exception


@pytest.mark.slow
def test_a_guarded_test_module_skips_locally_and_fails_in_ci(tmp_path):
    """tests/envs/test_atari_env.py in a pytest subprocess where ale_py cannot be imported."""
    (tmp_path / "hide_ale.py").write_text("import sys\n\nsys.modules['ale_py'] = None\n")
    outcomes = {}
    for required in ("", "1"):
        env = a3c_env() | {REQUIRE_EXTRAS_VAR: required}
        env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
        outcomes[required] = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "hide_ale", "-q", "-rs", "tests/envs/test_atari_env.py"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    local, ci = outcomes[""], outcomes["1"]
    # 5: no test collected (the whole module skipped); 2: a collection error stopped the run.
    assert local.returncode == 5 and "1 skipped" in local.stdout, local.stdout[-2000:]
    assert ci.returncode == 2 and "1 error" in ci.stdout, ci.stdout[-2000:]
    for result in (local, ci):
        assert "pip install -e '.[atari]'" in result.stdout, result.stdout[-2000:]


@pytest.fixture
def short_leak_wait(monkeypatch):
    monkeypatch.setitem(LEAK_WAIT_S, "function", 0.1)  # a leak here stays: a longer wait proves nothing


def blocked_cat() -> subprocess.Popen:
    """A process that runs until its stdin is closed."""
    return subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)


@pytest.mark.slow
def test_the_leak_check_fails_on_a_process_left_alive_and_kills_it(short_leak_wait):
    with (
        pytest.raises(pytest.fail.Exception, match="processes left behind: [0-9]+ \\(cat\\)"),
        no_leaks("function"),
    ):
        proc = blocked_cat()
    try:
        assert proc.wait(timeout=10) == -9
    finally:
        proc.stdin.close()


def test_the_leak_check_fails_on_a_dev_shm_entry_left(short_leak_wait):
    path = Path("/dev/shm") / f"a3c-test-{uuid.uuid4().hex}"
    try:
        left = f"left in /dev/shm: \\['{path.name}'\\]"
        with pytest.raises(pytest.fail.Exception, match=left), no_leaks("function"):
            path.write_bytes(b"")
    finally:
        path.unlink()


def test_the_leak_check_passes_what_is_cleaned_up(short_leak_wait):
    path = Path("/dev/shm") / f"a3c-test-{uuid.uuid4().hex}"
    with no_leaks("function"):
        path.write_bytes(b"")
        path.unlink()


@pytest.mark.slow
def test_a_process_started_below_a_wider_scopes_process_is_left_to_that_scope(short_leak_wait):
    """Like a module-scoped Ray cluster whose raylet starts worker processes during a test: those belong to
    the cluster's scope, checked when the module ends, not to the test."""
    outer = subprocess.Popen(["sh", "-c", "read line; cat; true"], stdin=subprocess.PIPE)  # "the cluster"
    try:
        with no_leaks("function"):
            outer.stdin.write(b"start a worker\n")
            outer.stdin.flush()
            deadline = time.monotonic() + 30
            while not descendants(outer.pid):  # the shell has started its ``cat``
                assert time.monotonic() < deadline, "the shell started no child"
                time.sleep(0.01)  # polling a condition under a deadline
    finally:
        outer.stdin.close()
        outer.wait(timeout=10)
