"""The Ray backend's cluster, for real: a cluster a run starts listens on loopback only and refuses another
token (the one run of the Ray modules whose cluster a3c starts itself: the Ray segment of a Pendulum run that
resumes local → ray → local, its statistics and optimizer state crossing backends both ways); a wrong
``--ray-address`` fails at
once; a cluster with token authentication off is refused; a run joins two nodes started with ``ray start``
as users start them (token authentication on, on a machine of the test's own), runs a node group on each
and goes on when one node is killed mid-run (its group started again on the head). Ray's
state API needs the dashboard (``ray[default]``, not installed), so placement is read from the GCS actor
table, its data source. Every process of the test carries the ``token`` and is checked (but the local
segments' workers, forked from the session's forkserver: the session's token)."""

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from a3c.backends.ray.listening import listening as listening_of
from tests.support import ROOT
from tests.support.commands import a3c_env, call_a3c, call_a3c_train
from tests.support.processes import alive, descendants, describe, left_behind, processes_with_token
from tests.support.ray_head import (
    HOST_IP,
    METRICS_EVERY,
    RAY_SHUTDOWN_S,
    WAIT_CAP_S,
    IsolatedMachine,
    Node,
    RayHead,
    actor_processes,
    assert_no_ray_left,
    auth_token_file,
    end,
    free_port,
    join_head,
    process_title,
    ray_auth_env,
    wait_for,
)
from tests.support.run_files import read_json

__import__("tests.support.extras", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

# The GCS declares a node dead after this many failed health checks this far apart (Ray's default: 5, 3 s
# apart): a killed raylet refuses them at once, whereas a live one has health_check_timeout_ms (10 s) to
# answer each. Its actors are restarted only then.
FAST_NODE_DEATH = json.dumps({"health_check_period_ms": 500, "health_check_failure_threshold": 3})
CAP_S = 600  # the run's --max-seconds and --hang-timeout: caps, never reached (the test ends it by a signal)


@pytest.fixture
def ray_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Token authentication with a token file of this test's own (never ~/.ray/auth_token): every process
    the test starts inherits these variables (not the local segments' workers, which read none)."""
    path = auth_token_file(tmp_path)
    for key, value in ray_auth_env(path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)  # it would take precedence over the file
    return path


@pytest.fixture
def ray_gives_up_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a refusal checked in this process: should a3c not refuse, Ray's own wait for a GCS (over 10
    minutes alone) gives up after a second instead of holding the pytest process."""
    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "1")


def listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses of the TCP sockets in LISTEN state that ``pids`` hold (from /proc/net)."""
    return {host for host, _ in listening(pids)}


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of each TCP socket in LISTEN state that ``pids`` hold (the run's own check's reader,
    tested on its own in tests/backends/test_ray_listening.py; IPv4-mapped IPv6 as IPv4)."""
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    found = set()
    for host, port in listening_of(processes):
        ip = ipaddress.ip_address(host)
        found.add((str(getattr(ip, "ipv4_mapped", None) or ip), port))
    return found


def probe() -> None:
    """(Run in a subprocess, with the cluster's ADDRESS and the number of nodes with a CPU to wait for as its
    arguments.) Connect as a3c does, wait (in this one process, under WAIT_CAP_S) until that many live nodes
    show a CPU, and print one JSON line: the live nodes' addresses and resources, and the live actors:
    [class, node, restarts]."""
    import ray

    from a3c.backends.ray.cluster import loopback_kept

    with loopback_kept():
        ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
    with_cpu = lambda: sum("CPU" in n["Resources"] for n in ray.nodes() if n["Alive"])  # noqa: E731
    wait_for(lambda: with_cpu() >= int(sys.argv[2]), WAIT_CAP_S, "nodes register their CPU")
    actors = [a for a in ray._private.state.actors().values() if a["State"] == "ALIVE"]
    alive_nodes = [n for n in ray.nodes() if n["Alive"]]
    result = {
        "nodes": {n["NodeID"]: sorted(n["Resources"]) for n in alive_nodes},
        "addresses": sorted(n["NodeManagerAddress"] for n in alive_nodes),
        "alive": [[a["ActorClassName"], a["Address"]["NodeID"], a["NumRestarts"]] for a in actors],
    }
    ray.shutdown()
    print(json.dumps(result), flush=True)


def start_probe(token: str, where: str, prefix: Sequence[str] = (), cpu_nodes: int = 0,
                **env: str) -> subprocess.Popen:  # fmt: skip
    """``probe`` in a subprocess of its own session (``prefix``: on an IsolatedMachine), its output
    piped (see ``probed``)."""
    probe_call = "from tests.backends.test_ray_cluster import probe; probe()"
    return subprocess.Popen([*prefix, sys.executable, "-c", probe_call, where, str(cpu_nodes)], cwd=ROOT,
                            env=a3c_env(token) | env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip


def probed(token: str, where: str, prefix: Sequence[str] = (), cpu_nodes: int = 0) -> dict:
    return probe_result(start_probe(token, where, prefix, cpu_nodes))


def probe_result(probe_run: subprocess.Popen) -> dict:
    """What a probe from ``start_probe`` printed, once it has ended (under WAIT_CAP_S)."""
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


def start_run(tmp_path: Path, token: str, address: str | None, workers: int = 2, budget: str = "",
              prefix: Sequence[str] = ()) -> subprocess.Popen:  # fmt: skip
    """``a3c train --backend ray [--ray-address ADDRESS]`` on paced CartPole (tests/support/envs.py ``Paced``)
    that does not end by itself (its target is out of reach) unless given a ``budget`` (e.g. ``--max-steps
    N``), stdout and stderr to files (read while it runs); ``prefix``: on an IsolatedMachine. No actor is
    taken for hung (``--hang-timeout`` = the cap): the faults here are deaths."""
    args = f"train --env CartPole-v1 --wrapper tests.support.envs:Paced --backend ray --workers {workers}"
    args += f" --target-return 1e9 --quiet --max-seconds {CAP_S} --hang-timeout {CAP_S}"
    args += f" --run-dir {tmp_path / 'run'}"
    args += f" --set metrics_interval_steps={METRICS_EVERY} {budget}"
    args += f" --ray-address {address}" if address else ""
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        command = [*prefix, sys.executable, "-m", "a3c", *args.split()]
        return subprocess.Popen(command, cwd=ROOT, env=a3c_env(token), stdout=out, stderr=err,
                                start_new_session=True)  # fmt: skip


def gcs_address(pids: set[int]) -> str:
    """HOST:PORT of the GCS server among ``pids``: the one socket it listens on (its port, 0 on its command
    line, is the kernel's pick)."""
    servers = {pid for pid in pids if process_title(pid).endswith("/gcs_server")}
    assert len(servers) == 1, describe(pids)
    ((host, port),) = listening(servers)
    return f"{host}:{port}"


SEGMENT_STEPS = 8_000  # the local segments' step budgets: 250 steps for each of 2 × 16 envs, past an episode


def train_locally(run_dir: Path, *args: str) -> dict:
    """A local-backend segment of the run to its step budget, two workers (the trainer in this process, its
    workers forked from the session's forkserver); its summary."""
    result = call_a3c_train(*args, "--backend", "local", "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starts afresh" not in result.stderr  # no statistics lost at a resume
    return read_json(run_dir / "summary.json")


def check_segment(before: dict, after: dict, backend: str, resumes: int) -> None:
    """A segment went on from ``before``'s checkpoint: its counters, the optimizer's state and the shared
    statistics (one observation and one discounted return per env step: their counts hold every segment)."""
    assert after["config"]["backend"] == backend and after["resumes"] == resumes
    assert after["global_step"] > before["global_step"] and after["updates"] > before["updates"]
    step_before = before["optimizer_state"]["state"][0]["step"]
    assert after["optimizer_state"]["state"][0]["step"] > step_before
    for key in ("obs_norm", "reward_stats"):
        assert after[key]["count"] >= before[key]["count"] + after["global_step"] - before["global_step"], key


def test_a_checkpoint_crosses_backends_both_ways_and_the_cluster_a_run_starts_stays_on_loopback(
    tmp_path, token, ray_token
):
    """One Pendulum run (its preset: shared observation statistics and reward scaling, which must cross
    backends too) that changes backend at each resume, local → ray → local. The Ray segment is the one run of
    the Ray tests without ``--ray-address`` (the others join a head): the cluster it starts listens on
    loopback alone, refuses another token, and stops with the run, which SIGINT ends (exit 130, last.pt from
    its last sync)."""
    from a3c.rundir.resume import load_resume_checkpoint

    run_dir, err_path = tmp_path / "run", tmp_path / "stderr.txt"
    # The target, --max-seconds and --hang-timeout are out of reach: step budgets or the test end a segment.
    common = ("--target-return", "1e9", "--max-seconds", str(CAP_S), "--hang-timeout", str(CAP_S))
    train_locally(run_dir, "--env", "Pendulum-v1", "--max-steps", str(SEGMENT_STEPS), "--run-dir",
                  str(run_dir), *common)  # fmt: skip
    before = load_resume_checkpoint(run_dir)
    assert before["config"]["backend"] == "local" and before["global_step"] >= SEGMENT_STEPS
    assert before["config"]["obs_norm"] and before["config"]["reward_scale"]
    # Every observation and discounted return of every worker reached the checkpoint.
    assert before["obs_norm"]["count"] >= before["global_step"] <= before["reward_stats"]["count"]

    rows_before = len(metrics(run_dir))
    with open(tmp_path / "stdout.txt", "w") as out, open(err_path, "w") as err:
        # Its step budget is out of reach (its own would be the first segment's): the test ends it.
        command = ["train", "--resume", str(run_dir), "--backend", "ray", "--max-steps", str(10**9), *common,
                   "--workers", "2", "--set", f"metrics_interval_steps={METRICS_EVERY}"]  # fmt: skip
        run = subprocess.Popen([sys.executable, "-m", "a3c", *command, "--quiet"], cwd=ROOT,
                               env=a3c_env(token), stdout=out, stderr=err,
                               start_new_session=True)  # fmt: skip
    refused = None
    try:
        both = lambda: {r[2] for r in metrics(run_dir)[rows_before:]} == {"0", "1"}  # noqa: E731
        wait_for(both, WAIT_CAP_S, "both workers train on Ray", run, err_path)
        cluster = descendants(run.pid) | {run.pid}  # its Ray daemons, their workers and agents, its actors
        address = gcs_address(cluster)
        assert address.startswith("127.0.0.1:"), address
        # Every server of the cluster listens on loopback alone: nothing on 0.0.0.0 or an external address.
        assert listening_addresses(cluster | processes_with_token(token)) == {"127.0.0.1"}
        # The node it advertises is loopback, and a driver with another token is refused (one try: Ray
        # retries a refused token for 20 s). The two drivers side by side: each starts Ray's client (seconds).
        refused = start_probe(token, address, RAY_AUTH_TOKEN="0" * 64, RAY_gcs_server_port_wait_time_s="1")
        assert probed(token, address)["addresses"] == ["127.0.0.1"]
        _, refusal = refused.communicate(timeout=WAIT_CAP_S)
        assert refused.returncode != 0 and "InvalidAuthToken" in refusal, refusal[-3000:]
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=WAIT_CAP_S) == 130, err_path.read_text()[-3000:]
    finally:
        end(run)
        end(refused)
    assert "starts afresh" not in err_path.read_text()
    assert read_json(run_dir / "summary.json")["exit_reason"] == "SIGINT"
    assert read_json(run_dir / "config.json")["ray_address"] is None
    # Its cluster stopped with it (ray.shutdown() at the run's end): Ray's daemons are gone too, those whose
    # process title overwrote the token in their environ (Ray's agents) included.
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the run that started the cluster: {describe(left)}"
    left = wait_gone(cluster)
    assert not left, f"outlived the run that started the cluster: {describe(left)}"
    after = load_resume_checkpoint(run_dir)  # the last sync: weights, counters and statistics of one instant
    check_segment(before, after, "ray", resumes=1)

    before = after
    summary = train_locally(run_dir, "--resume", str(run_dir), "--max-steps",
                            str(before["global_step"] + SEGMENT_STEPS), *common)  # fmt: skip
    after = load_resume_checkpoint(run_dir)
    check_segment(before, after, "local", resumes=2)
    assert summary["exit_reason"] == "max_steps"
    assert after["global_step"] == summary["total_steps"] >= before["global_step"] + SEGMENT_STEPS
    steps = [int(line.split(",")[1]) for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
    assert steps == sorted(steps) and steps[-1] > before["global_step"]


def wait_gone(pids: set[int]) -> set[int]:
    """Those of ``pids`` still alive after up to RAY_SHUTDOWN_S s."""
    deadline = time.monotonic() + RAY_SHUTDOWN_S
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition under a deadline
    return left


def assert_address_refused(tmp_path: Path, token: str, address: str, why: str) -> None:
    """``a3c train --ray-address ADDRESS`` is bad input: one line naming ``why``, exit 2, before the run dir
    exists (a3c's own check, not Ray's retries: alone Ray retries for over 10 minutes). In this process: the
    refusal comes before anything starts."""
    args = f"train --env CartPole-v1 --backend ray --ray-address {address} --max-seconds 30 --quiet"
    result = call_a3c(*args.split(), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: --ray-address {address}: {why}; "
        "expected HOST:PORT of a head started with `ray start --head --port=PORT`, reachable from here"
    ]
    assert not (tmp_path / "run").exists()


def test_a_run_given_an_address_where_no_head_answers_fails_at_once(
    tmp_path, token, ray_token, ray_gives_up_at_once
):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    assert_address_refused(
        tmp_path, token, address, "no Ray head answers there ([Errno 111] Connection refused)"
    )


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A web server's handler that logs nothing (its log would land in the refusal's captured stderr)."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
        pass


def test_a_run_given_an_address_where_something_else_answers_fails_at_once(
    tmp_path, token, ray_token, ray_gives_up_at_once
):
    server = http.server.HTTPServer(("127.0.0.1", 0), QuietHandler)
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


def test_a_run_whose_own_cluster_would_have_token_auth_off_is_refused_before_it_starts(
    tmp_path, token, monkeypatch, ray_gives_up_at_once
):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    args = f"train --env CartPole-v1 --backend ray --workers 1 --max-seconds {CAP_S} --quiet"
    result = call_a3c(*args.split(), "--run-dir", str(tmp_path / "run"))  # in this process: refused first
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        "error: RAY_AUTH_MODE: 'disabled' is not allowed for the Ray cluster a run starts; expected token or "
        "unset (without token authentication anyone who reaches its ports can run code on it)"
    ]
    assert not (tmp_path / "run").exists()  # refused before the run dir, and before any Ray process
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the refused run: {describe(left)}"


def test_a_ray_start_cluster_with_token_auth_off_is_refused_before_training(tmp_path, token):
    """A head started as users start it (``ray start``, no a3c code), token authentication off: joining it
    is refused in one line before the run dir exists. (A head alone: its GCS is what the run asks first;
    more nodes change nothing before the refusal.)"""
    machine = IsolatedMachine(token)
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    port = free_port()
    address, nodes = f"{HOST_IP}:{port}", []
    off = {"RAY_AUTH_MODE": "disabled"}
    try:
        nodes.append(Node("head", token, temp_root, "--head", f"--port={port}",
                          f"--node-ip-address={HOST_IP}", "--num-cpus=1", "--include-dashboard=false",
                          f"--ray-client-server-port={free_port()}", env=off, machine=machine))  # fmt: skip
        args = f"train --env CartPole-v1 --backend ray --workers 2 --ray-address {address} --quiet"
        args += f" --max-seconds {CAP_S} --run-dir {tmp_path / 'run'}"
        command = [*machine.prefix, sys.executable, "-m", "a3c", *args.split()]
        result = subprocess.run(command, cwd=ROOT, env=a3c_env(token), capture_output=True, text=True,
                                timeout=WAIT_CAP_S)  # fmt: skip
    finally:
        for node in reversed(nodes):
            node.kill()
        machine.close()
        shutil.rmtree(temp_root, ignore_errors=True)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: --ray-address {address}: the Ray cluster there has token authentication off: its GCS "
        f"({address}) answered a call without a token, so anyone who reaches its ports can run code on its "
        "nodes; expected a cluster started with RAY_AUTH_MODE=token on every node (docs/ray.md)"
    ]
    assert not (tmp_path / "run").exists()  # nothing trained, nothing written
    left = left_behind(token, timeout=RAY_SHUTDOWN_S)
    assert not left, f"outlived the refused run: {describe(left)}"


LABELS = ("head", "second")  # each node's custom resource, which names it


def placement(state: dict) -> tuple[set[str], dict[str, list]]:
    """(labels of the live nodes, {actor class: [(label of its node, restarts)]} of the live actors), from the
    GCS's node and actor tables as a probe read them (``probe_result``)."""
    labels = {node: next((r for r in LABELS if r in res), "?") for node, res in state["nodes"].items()}
    alive_actors = [(name, labels.get(node, "?"), restarts) for name, node, restarts in state["alive"]]
    actors = {name: sorted((n, r) for c, n, r in alive_actors if c == name) for name, _, _ in alive_actors}
    return set(labels.values()), actors


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


@dataclass
class UserCluster:
    """Two ``ray start`` nodes on an IsolatedMachine, started as users start them (no a3c code), token
    authentication on (``head.auth_token``); ``prefix`` runs a command on that machine."""

    head: RayHead
    second: Node
    prefix: list[str]

    def join(self, monkeypatch: pytest.MonkeyPatch, token: str) -> str:
        """The test's runs join it: its token, their actors carrying the test's ``token`` (join_head)."""
        return join_head(self.head, monkeypatch, token)


@pytest.fixture(scope="module")
def user_cluster(_no_leaks_in_module: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserCluster]:
    """(Module scope: set up before the test's leak check starts watching; the test kills ``second``.)"""
    token = _no_leaks_in_module
    token_file = auth_token_file(tmp_path_factory.mktemp("token"))
    auth = ray_auth_env(token_file)
    machine = IsolatedMachine(token)
    temp_root = Path(tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp"))  # short: Unix socket paths are capped
    port = free_port()
    address, nodes = f"{HOST_IP}:{port}", []
    try:
        nodes.append(Node("head", token, temp_root, "--head", f"--port={port}",
                          f"--node-ip-address={HOST_IP}", "--num-cpus=1", '--resources={"head": 1}',
                          "--include-dashboard=false",
                          f"--ray-client-server-port={free_port()}", f"--system-config={FAST_NODE_DEATH}",
                          env=auth, machine=machine))  # fmt: skip
        nodes.append(Node("second", token, temp_root, f"--address={address}", f"--node-ip-address={HOST_IP}",
                          "--num-cpus=1", '--resources={"second": 1}', env=auth,
                          machine=machine))  # fmt: skip
        cluster = UserCluster(RayHead(nodes[0], address, token_file), nodes[1], machine.prefix)
        with pytest.MonkeyPatch.context() as patch:
            cluster.join(patch, token)
            # The run splits its workers over the nodes it finds: both must show their CPU first (one probe
            # process waits for it).
            seen = probed(token, address, machine.prefix, cpu_nodes=2)
            assert sum("CPU" in resources for resources in seen["nodes"].values()) == 2, seen
            assert seen["addresses"] == [HOST_IP, HOST_IP], seen  # each advertises it, as on a network
        yield cluster
    finally:
        for node in reversed(nodes):
            node.kill()
        machine.close()
        shutil.rmtree(temp_root, ignore_errors=True)


def test_node_mode_runs_a_group_on_each_of_two_nodes_and_outlives_losing_one(tmp_path, token, user_cluster,
                                                                             monkeypatch):  # fmt: skip
    """The multi-machine run as users make it: it joins (the cluster demands a token; both nodes advertise
    their network address), runs one node group on each ``ray start`` node, each exchanging with two shards
    (which stay on the head); the second node dies, the driver starts its group again on the head and its
    worker trains on; SIGTERM (a scheduler's stop) ends the run with 143 and every exchange of the group
    that was never lost reached every shard. (Last: it kills the module's second node.)"""
    run_dir, err_path = tmp_path / "run", tmp_path / "stderr.txt"
    cluster = user_cluster
    address = cluster.join(monkeypatch, token)  # (both nodes advertise HOST_IP: the fixture's check)
    run = None
    try:
        # Two workers: one in each node's group. No evaluation (its actor is placed, but plays nothing): the
        # test checks none, and the CartPole preset's would take a core's fifth meanwhile.
        budget = f"--set sync_interval=0.5 --set ray_shards=2 --eval-interval {CAP_S}"
        run = start_run(tmp_path, token, address, workers=2, prefix=cluster.prefix, budget=budget)
        training = lambda: {r[2] for r in metrics(run_dir)} == {"0", "1"}  # noqa: E731
        wait_for(training, WAIT_CAP_S, "both workers train", run, err_path)
        # The probe that reads the placement (a driver of its own, seconds to start) runs while the test
        # waits for the first sync.csv rows (due SYNC_ROW_S into the run); no actor moves before the kill.
        reader = start_probe(token, address, cluster.prefix)
        try:
            both = lambda: {r["node"] for r in sync_rows(run_dir) if int(r["exchanges"]) > 0} == {"0", "1"}  # noqa: E731
            wait_for(both, WAIT_CAP_S, "both groups exchange", run, err_path)
            _, placed = placement(probe_result(reader))
        finally:
            end(reader)
        assert placed["NodeGroup"] == [("head", 0), ("second", 0)], placed
        assert placed["ParamShard"] == [("head", 0)] * 2 and placed["EvalActor"] == [("head", 0)], placed

        cluster.second.kill()
        lost = lambda: re.search(r"warning: node group 1 (died|was restarted)", err_path.read_text())  # noqa: E731
        wait_for(lost, WAIT_CAP_S, "the driver sees the lost group", run, err_path)
        since = len(metrics(run_dir))
        trains = lambda: [r[2] for r in metrics(run_dir)[since:]].count("1") >= 3  # noqa: E731
        wait_for(trains, WAIT_CAP_S, "the restarted group trains", run, err_path)
        assert len(actor_processes(token, "NodeGroup")) == 2  # both on the head now
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=WAIT_CAP_S) == 143, err_path.read_text()[-3000:]
    finally:
        end(run)
    summary = read_json(run_dir / "summary.json")
    stderr = err_path.read_text()
    assert summary["exit_reason"] == "SIGTERM" and summary["restarts"] == 1, (summary, stderr[-3000:])
    assert "node group 0" not in stderr, stderr[-3000:]
    last = {r["node"]: r for r in sync_rows(run_dir)}  # written after every group's last exchange
    assert last["0"]["exchanges"] == last["0"]["shard_exchanges_min"] == last["0"]["shard_exchanges_max"]
    assert last["0"]["workers"] == last["1"]["workers"] == "1"
    assert int(last["1"]["exchanges"]) > 0
    # Two groups: each saw the other's exchanges between two of its own.
    assert max(int(r["global_lag_max"]) for r in sync_rows(run_dir) if r["node"] == "0") >= 1
    print(f"sync.csv:\n{(run_dir / 'sync.csv').read_text()}")  # shown by pytest -s (the issue note quotes it)
    assert_no_ray_left(token)
