"""Ray nodes for the tests: ``ray start`` nodes on this machine's loopback (each with its own temp dir, found
and killed by a marker in their environment), and the shared head of the Ray tests (``ray_head``), which the
runs of its tests join with ``--ray-address`` instead of starting a cluster each.

The runs' actors are the head's raylet's children, not the runs', so ``join_head`` hands them the test's
token through Ray's job runtime env (``RAY_JOB_CONFIG_JSON_ENV_VAR``, merged by ``ray.init`` with the run's
own): the test's leak check then waits for them too, so that no run's actors outlive its test to hold the
head's CPUs in the next one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.commands import a3c_env
from tests.support.processes import (
    TOKEN_VAR,
    alive,
    descendants,
    describe,
    left_behind,
    process_parents,
    processes_with_token,
)

NODE_VAR = "A3C_TEST_RAY_NODE"  # marks every process of one node (its raylet's workers inherit it)
RAY_SHUTDOWN_S = 30.0  # Ray's daemons (gcs_server, raylet, ...) exit after the driver's ray.shutdown()
# Every wait in the Ray tests is for an event; this caps each one, for a run that never gets there (a defect):
# a node's `ray start`, a run's first records (Ray's start-up has taken 40 s on 2 loaded cores), a restart.
WAIT_CAP_S = 300.0
# The Ray runs' metrics row every this many steps of a worker: one a second or more, paced envs' too
# (tests/support/envs.py Paced), so a wait for rows is short.
METRICS_EVERY = 1000
HEAD_CPUS = 4  # the head's CPUs as Ray counts them (a run's node group, shards and evaluator reserve none)
# `ray start` waiting up to REGISTER_WAIT_S for its raylet to register with the GCS: Ray gives up after a
# fixed 30 s ("The current node timed out during startup"), which a node joining on 2 loaded cores has
# overrun. With ``loopback`` (the module heads), also keeping a loopback node IP and head address as given
# (see a3c/backends/ray/cluster.py); without it, as a user runs it (on a machine of the test's own:
# ``IsolatedMachine``).
REGISTER_WAIT_S = 240.0
RAY_START = f"""import contextlib, sys, time
import ray._private.services as services
from a3c.backends.ray.cluster import loopback_kept
from ray.scripts.scripts import main

get_node = services.get_node  # node.py calls it by this module attribute, so the patch below takes

def patient_get_node(gcs_address, node_id):
    deadline = time.monotonic() + {REGISTER_WAIT_S}
    while True:
        try:
            return get_node(gcs_address, node_id)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)

services.get_node = patient_get_node
loopback = sys.argv.pop(1) == "loopback"
sys.argv[0] = "ray"
with loopback_kept() if loopback else contextlib.nullcontext():
    main()
"""
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # ray.init merges this job config's runtime env into its own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def auth_token_file(folder: Path) -> Path:
    """A Ray auth token of the test's own (never ~/.ray/auth_token), in ``folder``."""
    path = folder / "ray_auth_token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return path


def ray_auth_env(path: Path) -> dict[str, str]:
    """Token authentication with the token in ``path`` (RAY_AUTH_TOKEN, which would take precedence over the
    file, must be unset)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}


def wait_for(condition: Callable[[], object], timeout: float, what: str, run: subprocess.Popen | None = None,
             err_path: Path | None = None) -> None:  # fmt: skip
    """Poll ``condition`` every 50 ms under a deadline; fail at once if ``run`` exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if run is not None and run.poll() is not None:
            err = err_path.read_text()[-3000:] if err_path else ""
            pytest.fail(f"a3c exited with {run.returncode} before {what}:\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.05)  # polling a condition under a deadline


# A machine of a test's own: a network namespace whose only interface is lo, carrying loopback and one
# network address from a documentation range (RFC 5737), which exists nowhere else; packets to it never
# leave the namespace. The holder sets it up, says so, and lives until its stdin closes.
HOST_IP = "198.51.100.1"
HOLD_NAMESPACE = f"""import subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "address", "add", "{HOST_IP}/24", "dev", "lo"], check=True)
print("up", flush=True)
sys.stdin.read()
"""


class IsolatedMachine:
    """A machine as a cluster's node sees one, of the test's own: a network namespace (``unshare --net``,
    so root) with loopback and the network address HOST_IP, reachable from nothing outside it. Processes
    started with ``prefix`` run on it; there ``ray start --node-ip-address=HOST_IP`` behaves as on a real
    machine: its nodes advertise HOST_IP and listen on every interface."""

    def __init__(self, token: str):
        self.holder = subprocess.Popen(["unshare", "--net", sys.executable, "-c", HOLD_NAMESPACE], cwd=ROOT,
                                       env=a3c_env(token), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, start_new_session=True)  # fmt: skip
        line = self.holder.stdout.readline().strip()
        if line != "up":
            self.close()
            why = "unshare --net needs root, util-linux and iproute2"
            pytest.fail(f"no network namespace of the test's own ({why}): {line!r}")
        self.prefix = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--"]

    def close(self) -> None:
        self.holder.stdin.close()
        self.holder.wait(timeout=10)
        self.holder.stdout.close()


class Node:
    """One ``ray start --block`` node: its processes carry ``NODE_VAR`` = a marker of their own, so they can
    be found (and killed) whoever their parent is. Started once ``ray start`` says so (``wait``: at once;
    else call ``wait_started``, so that nodes can start side by side). On ``machine`` (IsolatedMachine) as a
    user starts it; elsewhere on this machine's loopback, with the loopback hook (see RAY_START)."""

    def __init__(self, name: str, token: str, temp_root: Path, *args: str, env: dict[str, str] | None = None,
                 wait: bool = True, machine: IsolatedMachine | None = None):  # fmt: skip
        self.name, self.marker = name, f"{name}-{secrets.token_hex(4)}"
        self.log = temp_root / f"{name}.log"
        own_env = env or {}
        env = a3c_env(token) | own_env | {NODE_VAR: self.marker}
        if "RAY_AUTH_TOKEN_PATH" in own_env:
            env.pop("RAY_AUTH_TOKEN", None)  # it would take precedence over the file
        loopback = "plain" if machine else "loopback"  # on a machine of its own, as users run it
        command = [*(machine.prefix if machine else []), sys.executable, "-c", RAY_START, loopback, "start"]
        command += ["--block", "--disable-usage-stats", *args]
        command += ["--temp-dir", str(temp_root / name)]  # its own sessions, sockets and logs
        # Worker ports picked by the kernel: from Ray's default range, two nodes starting workers at once
        # (another module's head, in the other pytest process) could hand out one port twice.
        command += ["--min-worker-port=0", "--max-worker-port=0"]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)  # fmt: skip
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        try:
            wait_for(self.started, WAIT_CAP_S, f"ray start of the {self.name} node")
        except BaseException:
            self.kill()
            raise

    def started(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"ray start exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return "Ray runtime started" in self.log.read_text()

    def pids(self) -> set[int]:
        """The node's processes: those carrying the marker and their descendants. The raylet's agents
        (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) need the second: their process title overwrites
        the start of their environ, the marker with it (seen in CI: they outlived the node)."""
        needle = f"{NODE_VAR}={self.marker}".encode()
        found = set()
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
            except OSError:
                continue
        parents = process_parents()
        return alive(found.union(*(descendants(pid, parents) for pid in found)))

    def kill(self) -> None:
        """SIGKILL every process of this node (as a machine that dies would end them), until none is left.
        SIGSTOP first, so that no child is started, or orphaned out of reach, while the node is collected."""
        deadline = time.monotonic() + 30
        while pids := self.pids():
            assert time.monotonic() < deadline, f"node {self.marker} outlived SIGKILL: {describe(pids)}"
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                if sig == signal.SIGSTOP:
                    pids |= self.pids()  # the frozen tree, with any child started meanwhile
            time.sleep(0.05)  # polling a condition under a deadline
        self.proc.wait(timeout=10)


def process_title(pid: int) -> str:
    """A process's title (Ray's workers: ``ray::Class`` or ``ray::Class.method``); "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def actor_processes(token: str, actor: str) -> set[int]:
    """PIDs of the processes of ``token`` running an actor of class ``actor``."""
    return {pid for pid in processes_with_token(token) if process_title(pid).split(".")[0] == f"ray::{actor}"}


@dataclass
class RayHead:
    """A running head node: its address (``--ray-address``) and the token file its clients authenticate
    with."""

    node: Node
    address: str
    auth_token: Path


def start_ray_head() -> Iterator[RayHead]:
    """(A package- or module-scoped fixture's body.) One loopback head with its own auth token and
    ``HEAD_CPUS`` CPUs, killed at the end with every process it started (its actors included)."""
    # A token of the head's own marks its processes (not the scope's, which the session's forkserver and
    # resource tracker carry too); each run's actors get their test's (``join_head``).
    head_token = uuid.uuid4().hex
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    auth = auth_token_file(temp_root)
    port = free_port()
    node = None
    try:
        node = Node("head", head_token, temp_root, "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    f"--num-cpus={HEAD_CPUS}", "--include-dashboard=false",
                    f"--ray-client-server-port={free_port()}", env=ray_auth_env(auth))  # fmt: skip
        yield RayHead(node, f"127.0.0.1:{port}", auth)
    finally:
        if node is not None:
            node.kill()
        shutil.rmtree(temp_root, ignore_errors=True)
    left = left_behind(head_token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the Ray head: {describe(left)}"


def join_head(head: RayHead, monkeypatch: pytest.MonkeyPatch, token: str) -> str:
    """Let the test's runs join ``head``: its auth token, and a job runtime env giving every actor of theirs
    the test's ``token`` (so its leak check covers them). Returns the ``--ray-address``."""
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    for key, value in ray_auth_env(head.auth_token).items():
        monkeypatch.setenv(key, value)
    job = {"runtime_env": {"env_vars": {TOKEN_VAR: token}}}
    monkeypatch.setenv(JOB_CONFIG_VAR, json.dumps(job))
    return head.address


def end(run: subprocess.Popen | None) -> None:
    """Kill a run (its process group: not its actors, which Ray ends with their driver) if still running."""
    if run is None:
        return
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
    for pipe in (run.stdout, run.stderr):
        if pipe is not None:
            pipe.close()


def assert_no_ray_left(token: str) -> None:
    """No process of the test's runs is left: drivers and their actors (Ray's own too, for a cluster a run
    started)."""
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the run: {describe(left)}"
