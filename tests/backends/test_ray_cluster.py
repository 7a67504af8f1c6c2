"""The Ray backend's cluster, for real: a cluster a run starts listens on loopback only (the one test of the
Ray modules whose cluster a3c starts itself); a wrong ``--ray-address`` fails at once; a run joins nodes
started with ``ray start`` (on this machine's loopback, each with its own temp dir; token authentication with
a token file of the test's own), places a worker actor on each, and goes on when one node is killed mid-run
(its worker actor restarted on a spare node standing by). Ray's state API needs the dashboard
(``ray[default]``, not installed), so placement is read from the GCS actor table, its data source, or from
the processes of a node. Every process of the test carries the ``token`` and is checked."""

from __future__ import annotations

import http.server
import ipaddress
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from a3c.backends.ray.listening import listening as listening_in
from a3c.backends.ray.listening import socket_inodes
from tests.helpers import (
    ROOT,
    a3c_env,
    alive,
    descendants,
    describe,
    left_behind,
    processes_with_token,
    read_json,
    run_a3c,
)
from tests.ray_head import (
    RAY_SHUTDOWN_S,
    WAIT_CAP_S,
    Node,
    actor_processes,
    auth_token_file,
    end,
    free_port,
    process_title,
    ray_auth_env,
    wait_for,
)

__import__("tests.helpers", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

# The GCS declares a node dead after this many failed health checks this far apart (Ray's default: 5, 3 s
# apart): a killed raylet refuses them at once, whereas a live one has health_check_timeout_ms (10 s) to
# answer each. Its actors are restarted only then.
FAST_NODE_DEATH = json.dumps({"health_check_period_ms": 500, "health_check_failure_threshold": 3})
CAP_S = 600  # the run's --max-seconds and --hang-timeout: caps, never reached (the test ends it by SIGINT)


@pytest.fixture
def ray_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Token authentication with a token file of this test's own (never ~/.ray/auth_token): every process
    the test starts inherits these variables."""
    path = auth_token_file(tmp_path)
    for key, value in ray_auth_env(path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)  # it would take precedence over the file
    return path


def listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses of the TCP sockets in LISTEN state that ``pids`` hold (from /proc/net)."""
    return {host for host, _ in listening(pids)}


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of each TCP socket in LISTEN state that ``pids`` hold (from /proc/net; the parser is
    the run's own check's, tested on its own in tests/backends/test_ray_listening.py)."""
    inodes = socket_inodes(pids)
    found = set()
    for table in ("tcp", "tcp6"):
        for address in listening_in(Path(f"/proc/net/{table}").read_text(), inodes):
            host, port = address.rsplit(":", 1)
            ip = ipaddress.ip_address(host)
            found.add((str(getattr(ip, "ipv4_mapped", None) or ip), int(port)))
    return found


def probe() -> None:
    """(Run in a subprocess, with the cluster's ADDRESS as its argument.) Connect as a3c does and print one
    JSON line: the live nodes' addresses and resources, and the live actors: [class, node, restarts]."""
    import ray

    from a3c.backends.ray.cluster import loopback_kept

    with loopback_kept():
        ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
    actors = [a for a in ray._private.state.actors().values() if a["State"] == "ALIVE"]
    alive_nodes = [n for n in ray.nodes() if n["Alive"]]
    result = {
        "nodes": {n["NodeID"]: sorted(n["Resources"]) for n in alive_nodes},
        "addresses": sorted(n["NodeManagerAddress"] for n in alive_nodes),
        "alive": [[a["ActorClassName"], a["Address"]["NodeID"], a["NumRestarts"]] for a in actors],
    }
    ray.shutdown()
    print(json.dumps(result), flush=True)


def start_probe(token: str, where: str, **env: str) -> subprocess.Popen:
    """``probe`` in a subprocess of its own session, its output piped (see ``probed``)."""
    probe_call = "from tests.backends.test_ray_cluster import probe; probe()"
    return subprocess.Popen([sys.executable, "-c", probe_call, where], cwd=ROOT, env=a3c_env(token) | env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def probed(token: str, where: str) -> dict:
    probe_run = start_probe(token, where)
    try:
        out, err = probe_run.communicate(timeout=WAIT_CAP_S)
    finally:
        end(probe_run)
    assert probe_run.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def metrics(run_dir: Path) -> list[list[str]]:
    """metrics.csv's complete data rows so far, in the order the driver wrote them (none before it exists)."""
    try:
        lines = (run_dir / "metrics.csv").read_text().splitlines(keepends=True)[1:]
    except OSError:
        return []
    return [line.rstrip("\n").split(",") for line in lines if line.endswith("\n")]


def crashed(err_path: Path) -> list[str]:
    """The ids of the workers the driver reported crashed, from its stderr."""
    return re.findall(r"warning: worker (\d+) crashed", err_path.read_text())


def start_run(
    tmp_path: Path, token: str, address: str | None, workers: int = 2, mode: str = "gradient"
) -> subprocess.Popen:
    """``a3c train --backend ray [--ray-address ADDRESS]`` that does not end by itself (its target is out of
    reach), stdout and stderr to files (read while it runs). No actor is taken for hung (``--hang-timeout``
    = the cap): the faults here are deaths, and a worker actor that waits for a node to join is not hung."""
    args = f"train --env CartPole-v1 --backend ray --workers {workers} --target-return 1e9 --quiet"
    args += f" --max-seconds {CAP_S} --hang-timeout {CAP_S} --run-dir {tmp_path / 'run'}"
    args += f" --set ray_mode={mode}"
    args += f" --ray-address {address}" if address else ""
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "a3c", *args.split()], cwd=ROOT, env=a3c_env(token),
                                stdout=out, stderr=err, start_new_session=True)  # fmt: skip


def gcs_address(pids: set[int]) -> str:
    """HOST:PORT of the GCS server among ``pids``: the one socket it listens on (its port, 0 on its command
    line, is the kernel's pick)."""
    servers = {pid for pid in pids if process_title(pid).endswith("/gcs_server")}
    assert len(servers) == 1, describe(pids)
    ((host, port),) = listening(servers)
    return f"{host}:{port}"


def test_a_run_that_starts_its_own_cluster_keeps_it_on_loopback_and_stops_it(tmp_path, token, ray_token):
    """The one run of the Ray tests without ``--ray-address`` (the others join a head): the cluster it starts
    listens on loopback alone, refuses another token, and stops with the run."""
    run_dir, err_path = tmp_path / "run", tmp_path / "stderr.txt"
    run = start_run(tmp_path, token, None, workers=1)
    refused = None
    try:
        wait_for(lambda: metrics(run_dir), WAIT_CAP_S, "its worker trains", run, err_path)
        cluster = descendants(run.pid) | {run.pid}  # its Ray daemons, their workers and agents, its actors
        address = gcs_address(cluster)
        assert address.startswith("127.0.0.1:"), address
        # Every server of the cluster listens on loopback alone: nothing on 0.0.0.0 or an external address.
        assert listening_addresses(cluster | processes_with_token(token)) == {"127.0.0.1"}
        # The node it advertises is loopback, and a driver with another token is refused (one try: Ray
        # retries a refused token for 20 s).
        assert probed(token, address)["addresses"] == ["127.0.0.1"]
        refused = start_probe(token, address, RAY_AUTH_TOKEN="0" * 64, RAY_gcs_server_port_wait_time_s="1")
        _, refusal = refused.communicate(timeout=WAIT_CAP_S)
        assert refused.returncode != 0 and "InvalidAuthToken" in refusal, refusal[-3000:]
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=WAIT_CAP_S) == 130, err_path.read_text()[-3000:]
    finally:
        end(run)
        end(refused)
    assert read_json(run_dir / "summary.json")["exit_reason"] == "SIGINT"
    assert read_json(run_dir / "config.json")["ray_address"] is None
    # Its cluster stopped with it (ray.shutdown() at the run's end): Ray's daemons are gone too, those whose
    # process title overwrote the token in their environ (Ray's agents) included.
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the run that started the cluster: {describe(left)}"
    left = wait_gone(cluster)
    assert not left, f"outlived the run that started the cluster: {describe(left)}"


def wait_gone(pids: set[int]) -> set[int]:
    """Those of ``pids`` still alive after up to RAY_SHUTDOWN_S s."""
    deadline = time.monotonic() + RAY_SHUTDOWN_S
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition under a deadline
    return left


def assert_address_refused(tmp_path: Path, token: str, address: str, why: str) -> None:
    """``a3c train --ray-address ADDRESS`` is bad input: one line naming ``why``, exit 2, before the run dir
    exists (a3c's own check, not Ray's retries: alone Ray retries for over 10 minutes; the timeout is a
    cap)."""
    args = f"train --env CartPole-v1 --backend ray --ray-address {address} --max-seconds 30 --quiet"
    result = run_a3c(*args.split(), "--run-dir", str(tmp_path / "run"), timeout=WAIT_CAP_S, token=token)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: --ray-address {address}: {why}; "
        "expected HOST:PORT of a head started with `ray start --head --port=PORT`, reachable from here"
    ]
    assert not (tmp_path / "run").exists()


def test_a_run_given_an_address_where_no_head_answers_fails_at_once(tmp_path, token, ray_token):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    assert_address_refused(
        tmp_path, token, address, "no Ray head answers there ([Errno 111] Connection refused)"
    )


def test_a_run_given_an_address_where_something_else_answers_fails_at_once(tmp_path, token, ray_token):
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{server.server_port}"  # a web server: the port is open, but it is not Ray
        why = "something answers there, but not a Ray head (no gRPC reply)"
        assert_address_refused(tmp_path, token, address, why)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_run_whose_own_cluster_has_token_auth_off_refuses_to_train(tmp_path, token, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    args = f"train --env CartPole-v1 --backend ray --workers 1 --max-seconds {CAP_S} --quiet"
    result = run_a3c(*args.split(), "--run-dir", str(tmp_path / "run"), timeout=WAIT_CAP_S, token=token)
    assert result.returncode == 1, result.stderr[-3000:]
    line = (
        "error: ray failed: the Ray cluster this run started has token authentication off "
        "(RAY_AUTH_MODE='disabled'); unset RAY_AUTH_MODE or set it to token"
    )
    assert line in result.stderr.splitlines(), result.stderr[-3000:]  # one line says why
    assert read_json(tmp_path / "run" / "summary.json")["total_steps"] == 0  # no worker ever started
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the refused run: {describe(left)}"


LABELS = ("head", "second", "third")  # each node's custom resource, which names it


def placement(token: str, address: str) -> tuple[set[str], dict[str, list[tuple[str, int]]]]:
    """(labels of the live nodes, {actor class: [(label of its node, restarts)]} of the live actors), from the
    GCS's node and actor tables."""
    state = probed(token, address)
    labels = {node: next((r for r in LABELS if r in res), "?") for node, res in state["nodes"].items()}
    alive_actors = [(name, labels.get(node, "?"), restarts) for name, node, restarts in state["alive"]]
    actors = {name: sorted((n, r) for c, n, r in alive_actors if c == name) for name, _, _ in alive_actors}
    return set(labels.values()), actors


def test_a_run_spans_two_ray_start_nodes_and_outlives_losing_one(tmp_path, token, ray_token):
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    port = free_port()
    address, run_dir, err_path = f"127.0.0.1:{port}", tmp_path / "run", tmp_path / "stderr.txt"
    nodes: list[Node] = []
    run = refused = None
    try:
        # One CPU per node, one worker actor each. Two nodes join once the server and the evaluator (no CPU:
        # placed anywhere) run on the head, so that they outlive the node that is lost: one gets the worker
        # actor that waits for a CPU, the other stands by (its CPU idle, no actor pending) to take it over.
        head = Node("head", token, temp_root, "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    "--num-cpus=1", '--resources={"head": 1}', "--include-dashboard=false",
                    f"--ray-client-server-port={free_port()}",
                    f"--system-config={FAST_NODE_DEATH}")  # fmt: skip
        nodes.append(head)
        # Meanwhile: a driver with another token is refused (one try: Ray retries a refused token for 20 s).
        refused = start_probe(token, address, RAY_AUTH_TOKEN="0" * 64, RAY_gcs_server_port_wait_time_s="1")
        run = start_run(tmp_path, token, address)
        on_head = lambda: head.runs("ParameterServer") and head.runs("EvalActor")  # noqa: E731
        wait_for(on_head, WAIT_CAP_S, "the server and the evaluator run on the head", run, err_path)
        node_args = (f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1")
        for name in ("second", "third"):
            nodes.append(Node(name, token, temp_root, *node_args, f'--resources={{"{name}": 1}}', wait=False))
        for node in nodes[1:]:
            node.wait_started()
        training = lambda: {r[2] for r in metrics(run_dir)} == {"0", "1"}  # noqa: E731
        wait_for(training, WAIT_CAP_S, "both workers train", run, err_path)
        live, placed = placement(token, address)
        (lost_node,) = [node for node in nodes[1:] if node.runs("RayWorker")]  # the other one's node
        (spare,) = set(nodes[1:]) - {lost_node}
        workers = sorted([("head", 0), (lost_node.name, 0)])
        assert live == {"head", "second", "third"}, live
        assert placed == {"ParameterServer": [("head", 0)], "EvalActor": [("head", 0)], "RayWorker": workers}
        # Every server of the cluster, the run's driver and actors included, listens on loopback alone.
        assert listening_addresses(processes_with_token(token)) == {"127.0.0.1"}
        _, refusal = refused.communicate(timeout=WAIT_CAP_S)
        assert refused.returncode != 0 and "InvalidAuthToken" in refusal, refusal[-3000:]

        # The machine of one worker actor dies: its raylet, its worker actor, everything of it. The lost
        # worker actor is restarted on the spare, in place since before (its loop by the driver).
        lost_node.kill()
        wait_for(lambda: crashed(err_path), WAIT_CAP_S, "the driver sees the lost worker", run, err_path)
        assert len(crashed(err_path)) == 1, err_path.read_text()[-3000:]  # one loss, one report
        (lost,) = crashed(err_path)
        # Rows of the lost worker's id from now on: a push in flight at the loss (at most two, a metrics row
        # each) may land after it; three rows hold one of the restarted worker's at least.
        since = len(metrics(run_dir))
        trains = lambda: [r[2] for r in metrics(run_dir)[since:]].count(lost) >= 3  # noqa: E731
        wait_for(trains, WAIT_CAP_S, "the restarted worker trains", run, err_path)
        # It runs on the spare now (where each actor runs, from the nodes' processes: the GCS's tables were
        # read above); the rest stayed on the head.
        assert spare.runs("RayWorker")
        assert all(head.runs(actor) for actor in ("ParameterServer", "EvalActor", "RayWorker"))
        assert len(actor_processes(token, "RayWorker")) == 2

        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=WAIT_CAP_S) == 130, err_path.read_text()[-3000:]
    finally:
        end(run)
        end(refused)
        for node in reversed(nodes):
            node.kill()
        shutil.rmtree(temp_root, ignore_errors=True)
    summary = read_json(run_dir / "summary.json")
    stderr = err_path.read_text()
    assert summary["exit_reason"] == "SIGINT" and summary["restarts"] == 1, (summary, stderr[-3000:])
    assert crashed(err_path) == [lost] and "hung" not in stderr, stderr[-3000:]
    after = [r for r in metrics(run_dir)[since:] if r[2] == lost]
    assert len(after) >= 3 and sum(int(r[3]) for r in after) > 0, after
    assert (run_dir / "checkpoints" / "last.pt").exists()
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the test's cluster: {describe(left)}"


def sync_rows(run_dir: Path) -> list[dict[str, str]]:
    """sync.csv's complete rows so far (none before it exists)."""
    try:
        lines = (run_dir / "sync.csv").read_text().splitlines(keepends=True)
    except OSError:
        return []
    header = lines[0].rstrip("\n").split(",") if lines else []
    return [
        dict(zip(header, line.rstrip("\n").split(","), strict=True))
        for line in lines[1:]
        if line.endswith("\n")
    ]


def test_node_mode_runs_a_group_on_each_of_two_nodes_and_outlives_losing_one(tmp_path, token, ray_token):
    """Node mode (the default): one node group on each ``ray start`` node, each exchanging with the shards
    (which stay on the head); the second node dies, the driver starts its group again on the head and its
    worker trains on; every exchange of the group that was never lost reached every
    shard."""
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    port = free_port()
    address, run_dir, err_path = f"127.0.0.1:{port}", tmp_path / "run", tmp_path / "stderr.txt"
    nodes: list[Node] = []
    run = None
    try:
        head = Node("head", token, temp_root, "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    "--num-cpus=1", '--resources={"head": 1}', "--include-dashboard=false",
                    f"--ray-client-server-port={free_port()}",
                    f"--system-config={FAST_NODE_DEATH}")  # fmt: skip
        nodes.append(head)
        second = Node("second", token, temp_root, f"--address={address}", "--node-ip-address=127.0.0.1",
                      "--num-cpus=1", '--resources={"second": 1}')  # fmt: skip
        nodes.append(second)
        # The run splits its workers over the nodes it finds: both must show their CPU first.
        with_cpus = lambda: sum("CPU" in r for r in probed(token, address)["nodes"].values()) == 2  # noqa: E731
        wait_for(with_cpus, WAIT_CAP_S, "both nodes register their CPU")
        # Three workers: two in the head's group, one in the second node's (exchanges do not depend on it).
        run = start_run(tmp_path, token, address, workers=3, mode="node")
        training = lambda: {r[2] for r in metrics(run_dir)} == {"0", "1", "2"}  # noqa: E731
        wait_for(training, WAIT_CAP_S, "the three workers train", run, err_path)
        _, placed = placement(token, address)
        assert placed["NodeGroup"] == [("head", 0), ("second", 0)], placed
        assert placed["ParamShard"] == placed["EvalActor"] == [("head", 0)], placed
        both = lambda: {r["node"] for r in sync_rows(run_dir) if int(r["exchanges"]) > 0} == {"0", "1"}  # noqa: E731
        wait_for(both, WAIT_CAP_S, "both groups exchange", run, err_path)

        second.kill()
        lost = lambda: re.search(r"warning: node group 1 (died|was restarted)", err_path.read_text())  # noqa: E731
        wait_for(lost, WAIT_CAP_S, "the driver sees the lost group", run, err_path)
        since = len(metrics(run_dir))
        trains = lambda: [r[2] for r in metrics(run_dir)[since:]].count("2") >= 3  # noqa: E731
        wait_for(trains, WAIT_CAP_S, "the restarted group trains", run, err_path)
        assert len(actor_processes(token, "NodeGroup")) == 2  # both on the head now
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=WAIT_CAP_S) == 130, err_path.read_text()[-3000:]
    finally:
        end(run)
        for node in reversed(nodes):
            node.kill()
        shutil.rmtree(temp_root, ignore_errors=True)
    summary = read_json(run_dir / "summary.json")
    stderr = err_path.read_text()
    assert summary["exit_reason"] == "SIGINT" and summary["restarts"] == 1, (summary, stderr[-3000:])
    assert "node group 0" not in stderr, stderr[-3000:]
    last = {r["node"]: r for r in sync_rows(run_dir)}  # written after every group's last exchange
    assert last["0"]["exchanges"] == last["0"]["shard_exchanges_min"] == last["0"]["shard_exchanges_max"]
    assert last["0"]["workers"] == "2" and last["1"]["workers"] == "1"
    assert int(last["1"]["exchanges"]) > 0
    # Two groups: each saw the other's exchanges between two of its own.
    assert max(int(r["global_lag_max"]) for r in sync_rows(run_dir) if r["node"] == "0") >= 1
    print(f"sync.csv:\n{(run_dir / 'sync.csv').read_text()}")  # shown by pytest -s (the issue note quotes it)
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the test's cluster: {describe(left)}"
