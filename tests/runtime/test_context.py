"""Children come from a forkserver that preloaded torch, with one thread per math library."""

from __future__ import annotations

import os

import pytest

from tests.support import counters_child


@pytest.mark.slow
def test_forkserver_children_run_one_thread_per_library():
    from a3c.runtime.context import ONE_THREAD, child_context

    ctx = child_context()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=counters_child.report_threads, args=(writer,), daemon=True)
    child.start()
    writer.close()
    try:
        assert reader.poll(60), "the child sent nothing within 60 s"
        report = reader.recv()
        child.join(timeout=30)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join(timeout=10)
    assert report["env"] == ONE_THREAD
    assert report["torch_threads"] == 1


def test_the_forkserver_starts_with_one_thread_per_library_and_the_callers_environment_comes_back(
    monkeypatch,
):
    # The test processes themselves run one thread per library (tests/conftest.py), so the child above would
    # see ONE_THREAD even if start_early did not set it: here the caller's values differ, and are checked.
    from multiprocessing import forkserver

    from a3c.runtime import context

    seen: dict[str, str | None] = {}
    monkeypatch.setattr(forkserver, "set_forkserver_preload", lambda modules: None)

    def ensure_running() -> None:
        seen.update({name: os.environ.get(name) for name in context.ONE_THREAD})

    monkeypatch.setattr(forkserver, "ensure_running", ensure_running)
    for name in context.ONE_THREAD:
        monkeypatch.setenv(name, "4")
    context.start_early()
    assert seen == context.ONE_THREAD
    assert {name: os.environ[name] for name in context.ONE_THREAD} == dict.fromkeys(context.ONE_THREAD, "4")


@pytest.mark.slow
def test_a_respawned_forkserver_still_gives_its_children_one_thread(token):
    # multiprocessing starts a new server with the environment of that moment when it finds the last one
    # dead; here that environment asks for 4 threads per library (the caller's own settings).
    import json
    import subprocess
    import sys

    from a3c.runtime.context import ONE_THREAD
    from tests.support import ROOT
    from tests.support.commands import a3c_env

    command = [sys.executable, "-m", "tests.support.respawned_server"]
    result = subprocess.run(
        command, cwd=ROOT, env=a3c_env(token), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert (seen["respawned"], seen["exitcode"]) == (True, 0), seen
    assert (seen["env"], seen["torch_threads"]) == (ONE_THREAD, 1), seen
