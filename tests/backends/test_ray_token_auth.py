"""Whether a Ray cluster demands a token is asked of its servers (a3c/backends/ray/token_auth.py): a gRPC
server of the test's own, on loopback, stands for a Ray server with token authentication on, off, or
answering something else; and when a run judges its cluster again (``Rechecks``)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from a3c.backends.base import BackendFailed
from a3c.backends.ray import cluster as cluster_module
from a3c.backends.ray.cluster import Cluster, Rechecks, check_address, check_joined, check_start_env
from a3c.backends.ray.token_auth import GCS_METHOD, RAYLET_METHOD, CannotTell, demands_token

__import__("tests.support.extras", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI


class Server(grpc.GenericRpcHandler):
    """Answers ``method`` (UNAUTHENTICATED when ``demands`` a token and the call carries none), nothing
    else (UNIMPLEMENTED); records the metadata of every call."""

    def __init__(self, method: str, demands: bool):
        self.method, self.demands, self.calls = method, demands, []

    def service(self, details):  # noqa: ANN001, ANN201 - grpc's handler protocol
        if details.method != self.method:
            return None
        return grpc.unary_unary_rpc_method_handler(self.answer)

    def answer(self, request: bytes, context) -> bytes:  # noqa: ANN001
        metadata = dict(context.invocation_metadata())
        self.calls.append(metadata)
        if self.demands and "authorization" not in metadata:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken: missing")
        return b""


@contextmanager
def serve(handler: Server) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait(timeout=10)


@pytest.fixture
def token_server() -> Iterator[tuple[Server, str]]:
    handler = Server(GCS_METHOD, demands=True)
    with serve(handler) as address:
        yield handler, address


@pytest.fixture
def open_server() -> Iterator[tuple[Server, str]]:
    handler = Server(GCS_METHOD, demands=False)
    with serve(handler) as address:
        yield handler, address


def test_a_server_that_refuses_a_call_without_a_token_demands_one(token_server):
    handler, address = token_server
    assert demands_token(address, GCS_METHOD) is True
    assert handler.calls and all("authorization" not in call for call in handler.calls)  # sent none


def test_a_server_that_answers_a_call_without_a_token_does_not(open_server):
    handler, address = open_server
    assert demands_token(address, GCS_METHOD) is False
    assert len(handler.calls) == 1


def test_any_other_answer_is_cannot_tell(token_server):
    _, address = token_server
    with pytest.raises(CannotTell, match="UNIMPLEMENTED"):
        demands_token(address, RAYLET_METHOD)  # a method it does not serve: no word on tokens
    with pytest.raises(CannotTell, match="UNAVAILABLE|DEADLINE_EXCEEDED"):
        demands_token("127.0.0.1:1", GCS_METHOD, timeout=5)  # nothing listens there


def test_an_address_whose_cluster_answers_without_a_token_is_refused(open_server):
    _, address = open_server
    with pytest.raises(ConnectionError) as refused:
        check_address(address)
    assert str(refused.value).startswith(f"--ray-address {address}: the Ray cluster there has token ")
    assert "RAY_AUTH_MODE=token" in str(refused.value)


def test_an_address_whose_cluster_demands_a_token_passes(token_server):
    _, address = token_server
    check_address(address)


@pytest.mark.parametrize(("mode", "allowed"), [(None, True), ("token", True), ("TOKEN", True),
                                               ("disabled", False), ("off", False), ("", False)])  # fmt: skip
def test_the_run_starts_its_own_cluster_only_with_token_auth(monkeypatch, mode, allowed):
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    if allowed:
        check_start_env()
    else:
        with pytest.raises(ValueError, match=f"^RAY_AUTH_MODE: '{mode}' is not allowed"):
            check_start_env()


@pytest.mark.parametrize("cluster", [Cluster.STARTED, Cluster.JOINED])
def test_a_cluster_is_judged_again_once_every_worker_pushed_and_after_each_restart(monkeypatch, cluster):
    judged = []
    monkeypatch.setattr(cluster_module, "check", judged.append)
    rechecks = Rechecks(cluster)
    # Judged once every worker pushed, then after the restart again once both pushed since.
    drains = [
        ([0, 0], 0),
        ([1, 0], 0),
        ([2, 1], 0),
        ([3, 2], 0),
        ([4, 2], 1),
        ([5, 2], 1),
        ([6, 3], 1),
        ([7, 4], 1),
    ]
    seen = []
    for updates, restarts in drains:
        rechecks.after_drain(np.array(updates), restarts)
        seen.append(len(judged))
    assert seen == [0, 0, 1, 1, 1, 1, 2, 2] and set(judged) == {cluster}


def test_the_callers_own_ray_is_not_judged(monkeypatch):
    judged = []
    monkeypatch.setattr(cluster_module, "check", judged.append)
    rechecks = Rechecks(Cluster.CALLER)
    for updates, restarts in [([0], 0), ([1], 0), ([2], 1), ([3], 1)]:
        rechecks.after_drain(np.array(updates), restarts)
    assert judged == []


def test_a_joined_cluster_is_refused_when_any_raylet_answers_without_a_token(monkeypatch, token_server):
    """Its GCS demands a token, one live node's raylet does not: refused, naming that raylet; a dead node
    is not asked."""
    _, gcs = token_server
    raylet = Server(RAYLET_METHOD, demands=False)
    context = SimpleNamespace(gcs_address=gcs)
    monkeypatch.setattr(cluster_module.ray, "get_runtime_context", lambda: context)
    with serve(raylet) as raylet_address:
        host, port = raylet_address.rsplit(":", 1)
        nodes = [
            {"Alive": True, "NodeManagerAddress": host, "NodeManagerPort": int(port), "NodeID": "aa" * 14},
            {"Alive": False, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": 1, "NodeID": "bb" * 14},
        ]
        monkeypatch.setattr(cluster_module.ray, "nodes", lambda: nodes)
        with pytest.raises(BackendFailed) as refused:
            check_joined()
        assert str(refused.value).startswith(
            "the Ray cluster this run joined has token authentication off: "
            f"the raylet of node {host} aaaaaaaa ({raylet_address}) answered a call without a token"
        )
        raylet.demands = True
        check_joined()  # every server demands one now
        assert len(raylet.calls) == 2


def test_every_raylet_is_asked_even_where_nodes_share_an_address(monkeypatch, token_server):
    """Two live nodes on one host (as on a machine running several nodes): both raylets are asked."""
    _, gcs = token_server
    demanding, answering = Server(RAYLET_METHOD, demands=True), Server(RAYLET_METHOD, demands=False)
    context = SimpleNamespace(gcs_address=gcs)
    monkeypatch.setattr(cluster_module.ray, "get_runtime_context", lambda: context)
    with serve(demanding) as first, serve(answering) as second:
        nodes = [
            {"Alive": True, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": int(a.rsplit(":", 1)[1]),
             "NodeID": node_id}
            for a, node_id in ((first, "aa" * 14), (second, "bb" * 14))
        ]  # fmt: skip
        monkeypatch.setattr(cluster_module.ray, "nodes", lambda: nodes)
        with pytest.raises(
            BackendFailed, match=f"the raylet of node 127.0.0.1 bbbbbbbb \\({second}\\) answered"
        ):
            check_joined()
    assert len(demanding.calls) == len(answering.calls) == 1


def test_node_mode_judges_again_on_the_updates_a_group_made_over_all_its_incarnations(monkeypatch):
    """A group restarted after its loss counts its workers' updates from 0 again: the driver hands the
    rechecks the run's counts (the lost incarnations' carried over), so the check after the restart comes
    as soon as every worker has pushed again."""
    from a3c.backends.ray.backend import RayBackend

    judged = []
    monkeypatch.setattr(cluster_module, "check", judged.append)
    run = object.__new__(RayBackend)
    run.next_drain, run._drain = 0.0, lambda: []
    run.rechecks = Rechecks(Cluster.JOINED)
    carried, slots = np.zeros((3, 2), np.int64), np.zeros((3, 2), np.int64)
    run.groups = SimpleNamespace(counts=lambda: carried + slots, slots=slots, restarts=0)
    run.eval_loop = SimpleNamespace(restarts=0)
    run.shard_epochs = [0]  # no shard rebuilt
    for updates in ([0, 0], [10, 10], [20, 20]):  # judged once both pushed
        slots[1], run.next_drain = updates, 0.0  # a drain due at every poll
        run.poll(0.0)
    assert len(judged) == 1
    run.groups.restarts = 1  # group 0 is lost in this drain: its incarnation's counts still in the slots
    run.next_drain = 0.0
    run.poll(0.0)
    carried[1], slots[1] = [20, 0], [0, 20]  # then carried over; its new incarnation counts from 0
    for updates in ([0, 30], [5, 40]):  # judged again as soon as both pushed since the restart
        slots[1], run.next_drain = updates, 0.0
        run.poll(0.0)
    assert len(judged) == 2
