"""Running ``a3c`` in tests: as a real command (a subprocess with the repo on PYTHONPATH and a token its
children inherit) or in-process (``call_a3c``; ``call_a3c_train``, whose workers, if any, fork from the
session's forkserver); a CartPole run to act on, and ending it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.processes import TOKEN_VAR, left_behind, processes_with_token, spawned_children
from tests.support.run_files import data_rows


def a3c_env(token: str = "") -> dict[str, str]:
    """The environment of an ``a3c`` subprocess: the repo importable, and a token every child inherits
    (by default the current test's, which every process a test starts carries: see ``scope_token``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env[TOKEN_VAR] = token or os.environ.get(TOKEN_VAR, "")
    return env


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
        f"train --env tests.support.envs:FixedLength-v0 --serial --max-steps {max_steps} --eval-interval 0.2"
    )
    return run_a3c(*args.split(), "--quiet", "--run-dir", str(run_dir), timeout=120, token=token)


def hangup_as_a_terminal_would() -> None:
    """In the child before exec: SIGHUP's default action, even when the tests run under ``nohup`` (an ignored
    signal stays ignored across exec, and a run that starts with it ignored respects that, as under nohup). A
    test that wants nohup's says so: ``prefix=("nohup",)``."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


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
        preexec_fn=hangup_as_a_terminal_would,
    )


def more_rows(run_dir: Path, proc: subprocess.Popen, rows: int) -> None:
    """Wait for ``rows`` more episodes rows: the trainer polled its children (and judged them) meanwhile."""
    before = data_rows(run_dir / "episodes.csv")
    wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") >= before + rows, timeout=120)


def wait_until(proc: subprocess.Popen, condition, timeout: float) -> None:
    """Block until ``condition()`` holds, checking every 50 ms; fail if ``proc`` exits or time runs out."""

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


def start_cartpole(
    run_dir, token, extra: str = "--target-return 1e9", max_seconds: int = 600, prefix: tuple[str, ...] = ()
) -> subprocess.Popen:
    """A CartPole run, once its 3 children train. By default one that does not end by itself (its target is
    out of reach; ``max_seconds`` is a safety cap): the test ends it, once what it waits for has happened.
    ``prefix``: a command that runs it (e.g. ``nohup``)."""
    args = f"train --env CartPole-v1 --workers 2 --max-seconds {max_seconds} --quiet {extra}"
    proc = popen_a3c(*args.split(), "--run-dir", str(run_dir), token=token, prefix=prefix)
    wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") >= 20, timeout=120)
    wait_until(proc, lambda: len(spawned_children(proc.pid)) == 3, timeout=30)
    assert processes_with_token(token) >= spawned_children(proc.pid) | {proc.pid}  # the leak check sees them
    return proc


def kill_trainer(proc: subprocess.Popen, token: str) -> None:
    """SIGKILL the trainer alone, as a machine's OOM killer would, and assert none of its children outlives
    it: the forkserver ends with the trainer and takes each child with it (PR_SET_PDEATHSIG); 30 s: a cap."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert not left_behind(token, timeout=30.0), "children outlived the SIGKILLed trainer"


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()


def train_serial_fixed_length(run_dir: Path, max_steps: int):
    """``run_serial_fixed_length``'s run in this process (``a3c.train``): the same run dir, without an
    interpreter and torch to start; its ``a3c.Run``, finished (exit 0)."""
    import a3c

    env_id = "tests.support.envs:FixedLength-v0"
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
