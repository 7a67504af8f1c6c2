"""The Ray backend's cluster, for real: a cluster a run starts listens on loopback only; a wrong
``--ray-address`` fails at once; a run joins nodes started with ``ray start`` (on this machine's loopback,
each with its own temp dir; token authentication with a token file of the test's own), places a worker
actor on each, and goes on when one node is killed mid-run (its worker actor restarted on a spare node
standing by). Ray's state API needs the dashboard (``ray[default]``, not installed), so placement is read
from the GCS actor table, its data source. Every process of the test carries the ``token`` and is checked."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import (
    ROOT,
    a3c_env,
    alive,
    data_rows,
    descendants,
    describe,
    left_behind,
    process_parents,
    processes_with_token,
    read_json,
    run_a3c,
)

__import__("tests.conftest", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

NODE_VAR = "A3C_TEST_RAY_NODE"  # marks every process of one node (its raylet's workers inherit it)
# `ray start` keeping a loopback node IP and head address as given (see a3c/backends/ray/cluster.py).
RAY_START = """import sys
from a3c.backends.ray.cluster import loopback_kept
from ray.scripts.scripts import main
sys.argv[0] = "ray"
with loopback_kept():
    main()
"""


@pytest.fixture
def ray_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Token authentication with a token file of this test's own (never ~/.ray/auth_token): every process
    the test starts inherits these variables."""
    path = tmp_path / "ray_auth_token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)  # it would take precedence over the file
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float, what: str, run: subprocess.Popen | None = None,
             err_path: Path | None = None) -> None:  # fmt: skip
    """Poll ``condition`` every 50 ms under a deadline; fail at once if ``run`` exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if run is not None and run.poll() is not None:
            pytest.fail(f"a3c exited with {run.returncode} before {what}:\n{err_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.05)  # polling a condition under a deadline


def listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses of the TCP sockets in LISTEN state that ``pids`` hold (from /proc/net)."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # little-endian words
            ip = ipaddress.ip_address(raw)
            found.add(str(getattr(ip, "ipv4_mapped", None) or ip))
    return found


def probe() -> None:
    """(Run in a subprocess, with ``start`` or ``ADDRESS`` as its argument.) Connect as a3c does and print one
    JSON line: with ``start``, the started cluster's node addresses, listening sockets and auth mode; with
    an address, the live nodes' resources and the live actors: [class, node, restarts]."""
    import ray
    from ray._raylet import AuthenticationMode, get_authentication_mode

    from a3c.backends.ray.cluster import connect, loopback_kept
    from a3c.core.config import Config

    if sys.argv[1] == "start":
        connect(Config(env_id="CartPole-v1", workers=1))
        result = {
            "nodes": [n["NodeManagerAddress"] for n in ray.nodes()],
            "gcs": ray.get_runtime_context().gcs_address,
            "listening": sorted(listening_addresses(descendants(os.getpid()) | {os.getpid()})),
            "token_auth": get_authentication_mode() == AuthenticationMode.TOKEN,
        }
    else:
        with loopback_kept():
            ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
        actors = [a for a in ray._private.state.actors().values() if a["State"] == "ALIVE"]
        result = {
            "nodes": {n["NodeID"]: sorted(n["Resources"]) for n in ray.nodes() if n["Alive"]},
            "alive": [[a["ActorClassName"], a["Address"]["NodeID"], a["NumRestarts"]] for a in actors],
        }
    ray.shutdown()
    print(json.dumps(result), flush=True)


def run_probe(token: str, where: str, **env: str) -> subprocess.CompletedProcess:
    probe_call = "from tests.backends.test_ray_cluster import probe; probe()"
    return subprocess.run([sys.executable, "-c", probe_call, where], cwd=ROOT, env=a3c_env(token) | env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def probed(token: str, where: str) -> dict:
    done = run_probe(token, where)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cluster_a_run_starts_listens_on_loopback_only(token, ray_token):
    found = probed(token, "start")
    assert found["nodes"] == ["127.0.0.1"] and found["gcs"].startswith("127.0.0.1:")
    assert found["listening"] and set(found["listening"]) == {"127.0.0.1"}, found  # nothing on 0.0.0.0
    assert found["token_auth"]
    assert not left_behind(token, timeout=30), "Ray processes outlived ray.shutdown()"


def test_a_run_given_an_address_where_no_head_answers_fails_at_once(tmp_path, token, ray_token):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    args = f"train --env CartPole-v1 --backend ray --ray-address {address} --max-seconds 30 --quiet"
    started = time.monotonic()
    result = run_a3c(*args.split(), "--run-dir", str(tmp_path / "run"), timeout=120, token=token)
    # Bad input: one line, exit 2, before the run dir exists.
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: --ray-address {address}: no Ray head answers there ([Errno 111] Connection refused); "
        "expected HOST:PORT of a head started with `ray start --head --port=PORT`, reachable from here"
    ]
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 60  # Ray alone would retry for over 10 minutes


class Node:
    """One ``ray start --block`` node of the test's cluster: its processes carry ``NODE_VAR`` = a marker of
    their own, so they can be found (and killed) whoever their parent is."""

    def __init__(self, name: str, token: str, temp_root: Path, *args: str):
        self.marker = f"{name}-{secrets.token_hex(4)}"
        self.log = temp_root / f"{name}.log"
        env = a3c_env(token) | {NODE_VAR: self.marker}
        command = [sys.executable, "-c", RAY_START, "start", "--block", "--disable-usage-stats", *args]
        command += ["--temp-dir", str(temp_root / name)]  # its own sessions, sockets and logs
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)  # fmt: skip
        wait_for(self.started, 120, f"ray start of the {name} node")

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


def metrics(run_dir: Path, skip: int = 0) -> list[list[str]]:
    """metrics.csv's data rows after the first ``skip`` (none before the file exists)."""
    try:
        return [line.split(",") for line in (run_dir / "metrics.csv").read_text().splitlines()[1 + skip :]]
    except OSError:
        return []


def crashed(err_path: Path) -> list[str]:
    """The ids of the workers the driver reported crashed, from its stderr."""
    return re.findall(r"warning: worker (\d+) crashed", err_path.read_text())


def start_run(tmp_path: Path, token: str, address: str) -> subprocess.Popen:
    """``a3c train --backend ray --ray-address ADDRESS``, stdout and stderr to files (read while it runs)."""
    args = "train --env CartPole-v1 --backend ray --workers 2 --target-return 1e9 --max-seconds 300 --quiet"
    args += f" --ray-address {address} --run-dir {tmp_path / 'run'}"
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "a3c", *args.split()], cwd=ROOT, env=a3c_env(token),
                                stdout=out, stderr=err, start_new_session=True)  # fmt: skip


def placement(token: str, address: str) -> dict[str, list[tuple[str, int]]]:
    """{actor class: [(label of its node, restarts)]} of the live actors, from the GCS actor table; a node's
    label is the custom resource it was started with (head, second, spare)."""
    state = probed(token, address)
    labels = {node: next((r for r in ("head", "second", "spare") if r in res), "?") for node, res in
              state["nodes"].items()}  # fmt: skip
    alive_actors = [(name, labels.get(node, "?"), restarts) for name, node, restarts in state["alive"]]
    return {name: sorted((n, r) for c, n, r in alive_actors if c == name) for name, _, _ in alive_actors}


def test_a_run_spans_two_ray_start_nodes_and_outlives_losing_one(tmp_path, token, ray_token):
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    port = free_port()
    address, run_dir, err_path = f"127.0.0.1:{port}", tmp_path / "run", tmp_path / "stderr.txt"
    nodes: list[Node] = []
    run = None
    try:
        # One CPU per node, one worker actor each. The second node joins once worker 0 trains: the server and
        # the evaluator (no CPU, placed anywhere) are on the head by then, so they outlive the second node.
        nodes.append(Node("head", token, temp_root, "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                          "--num-cpus=1", '--resources={"head": 1}', "--include-dashboard=false",
                          f"--ray-client-server-port={free_port()}"))  # fmt: skip
        run = start_run(tmp_path, token, address)
        training = lambda: {r[2] for r in metrics(run_dir)}  # noqa: E731
        wait_for(lambda: "0" in training(), 180, "worker 0 trains", run, err_path)
        node_args = (f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1")
        nodes.append(Node("second", token, temp_root, *node_args, '--resources={"second": 1}'))
        wait_for(lambda: training() == {"0", "1"}, 180, "both workers train", run, err_path)
        placed = placement(token, address)
        assert placed == {"ParameterServer": [("head", 0)], "EvalActor": [("head", 0)],
                          "RayWorker": [("head", 0), ("second", 0)]}, placed  # fmt: skip
        # Every server of the cluster, the run's driver and actors included, listens on loopback alone.
        assert listening_addresses(processes_with_token(token)) == {"127.0.0.1"}
        # A driver with another token is refused (one try: Ray would retry a refused token for 20 s).
        refused = run_probe(token, address, RAY_AUTH_TOKEN="0" * 64, RAY_gcs_server_port_wait_time_s="1")
        assert refused.returncode != 0 and "InvalidAuthToken" in refused.stderr, refused.stderr[-3000:]

        # A spare machine stands by (its CPU idle: no actor is pending) when the second machine dies: its
        # raylet, its worker actor, everything of it. The lost worker actor is restarted on the spare (its
        # loop by the driver). The spare joins first so that the restart does not wait for `ray start`: on
        # a slow machine that took CI past the driver's start-up window, and a worker that has not come back
        # within it is counted (and killed) as hung, a second restart.
        nodes.append(Node("spare", token, temp_root, *node_args, '--resources={"spare": 1}'))
        nodes[1].kill()
        wait_for(lambda: crashed(err_path), 120, "the driver sees the lost worker", run, err_path)
        lost, seen_at, rows_then = crashed(err_path)[0], time.time(), data_rows(run_dir / "metrics.csv")
        trains = lambda: [r[2] for r in metrics(run_dir, rows_then)].count(lost) >= 3  # noqa: E731
        wait_for(trains, 180, "the restarted worker trains", run, err_path)
        placed = placement(token, address)
        assert placed == {"ParameterServer": [("head", 0)], "EvalActor": [("head", 0)],
                          "RayWorker": [("head", 0), ("spare", 1)]}, placed  # fmt: skip

        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=120) == 130, err_path.read_text()[-3000:]
    finally:
        if run is not None and run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=10)
        for node in reversed(nodes):
            node.kill()
        shutil.rmtree(temp_root, ignore_errors=True)
    summary = read_json(run_dir / "summary.json")
    stderr = err_path.read_text()[-3000:]
    assert summary["exit_reason"] == "SIGINT" and summary["restarts"] == 1, (summary, stderr)
    assert crashed(err_path) == [lost], err_path.read_text()[-3000:]
    # It trained after the loss: rows stamped after the driver reported it (wall_time: s since the start).
    after = [r for r in metrics(run_dir) if r[2] == lost and float(r[0]) > seen_at - summary["start_unix"]]
    assert len(after) >= 2 and sum(int(r[3]) for r in after) > 0, after
    assert (run_dir / "checkpoints" / "last.pt").exists()
    left = left_behind(token, timeout=30)
    assert not left, f"outlived the test's cluster: {describe(left)}"
