"""The Ray cluster of a run, and the rule that judges it (``Cluster``): a run starts a one-node cluster on
this machine that listens on loopback only, or joins the one ``--ray-address`` names, which must demand a
token on every server. Each is judged before anything runs on it and again after restarts (``Rechecks``);
where a3c cannot tell, it refuses.

Why loopback needs help (Ray 2.60, read in its source): Ray replaces a loopback host (``127.0.0.1``,
``localhost``) in a node IP or a cluster address with this machine's external address
(``ray._private.services.resolve_ip_for_localhost``), so that a one-node cluster can be joined from other
machines; its servers then bind every interface. With the node IP kept at ``127.0.0.1`` they bind loopback
alone. ``loopback_kept`` keeps such a host as given, for a cluster a run starts and for an address that
names one (``--ray-address 127.0.0.1:PORT``).

Token authentication is Ray's own (docs/ray.md): the driver passes nothing; it reads ``RAY_AUTH_MODE``,
``RAY_AUTH_TOKEN_PATH`` / ``RAY_AUTH_TOKEN`` from its environment like every Ray process. That says how the
driver authenticates, not what a joined cluster demands: that is asked of its servers (token_auth.py).

It is long because it is one idea, a run's connection to its cluster: what ``ray.init`` would change
(the loopback host, the caller's SIGTERM handler) and the rules, which read together.
"""

from __future__ import annotations

import enum
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import ray
import ray._private.services as ray_services

try:  # private to Ray 2.60, the version this a3c supports: without it no cluster passes ``check_started``
    from ray._private.authentication.authentication_utils import is_token_auth_enabled
except ImportError:
    is_token_auth_enabled = None

from a3c.backends.base import BackendFailed
from a3c.backends.ray.listening import exposed_listeners, host_port
from a3c.backends.ray.token_auth import GCS_METHOD, RAYLET_METHOD, CannotTell, demands_token
from a3c.core.config import Config
from a3c.core.extras import install_hint
from a3c.runtime.context import ONE_THREAD

LOOPBACK = "127.0.0.1"
LOOPBACK_HOSTS = frozenset({LOOPBACK, "localhost", "::1"})
# Ray retries a head that does not answer for over 10 minutes (20 tries, ~40 s each measured), so a wrong
# --ray-address is caught first by opening a TCP connection under this limit.
CONNECT_TIMEOUT_S = 10.0
# A gRPC server (Ray's GCS) answers an HTTP/2 client preface and SETTINGS frame with its own SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_EMPTY_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # length 0, type 4 (SETTINGS), flags 0, stream 0
HTTP2_SETTINGS = 4


@contextmanager
def loopback_kept() -> Iterator[None]:
    """Within the block, Ray keeps a loopback host as given instead of swapping in the external address
    (see the module docstring). A Ray without that hook is not one this a3c supports: BackendFailed."""
    resolve = getattr(ray_services, "resolve_ip_for_localhost", None)
    if resolve is None:
        raise BackendFailed(
            "ray",
            f"Ray {ray.__version__} has no ray._private.services.resolve_ip_for_localhost, which keeps the "
            f"run's own cluster on loopback; this a3c supports Ray 2.60 ({install_hint('ray')})",
        )

    def as_given(host: str) -> str:
        return host if host in LOOPBACK_HOSTS else resolve(host)

    ray_services.resolve_ip_for_localhost = as_given
    try:
        yield
    finally:
        ray_services.resolve_ip_for_localhost = resolve


def node_addresses() -> set[str]:
    """The addresses the live nodes of the connected cluster advertise (their servers bind these)."""
    return {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}


def check_reachable(address: str) -> None:
    """Raise ConnectionError naming ``--ray-address`` unless HOST:PORT answers as a Ray head within
    CONNECT_TIMEOUT_S: a TCP connection, and a gRPC (HTTP/2) server's SETTINGS frame in reply to the HTTP/2
    client preface, as Ray's GCS gives (an SSH or web server, or a closed port, does not; with
    ``RAY_USE_TLS`` the connection alone). ``auto`` and ``ray://`` addresses are Ray's to resolve: not
    checked."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    expected = "expected HOST:PORT of a head started with `ray start --head --port=PORT`, reachable from here"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return  # a TLS head answers a plain preface with nothing we could read: the connection is all
            sock.sendall(HTTP2_PREFACE + HTTP2_EMPTY_SETTINGS)
            header = _read(sock, 9)
    except (OSError, ValueError) as exc:
        raise ConnectionError(
            f"--ray-address {address}: no Ray head answers there ({exc}); {expected}"
        ) from None
    if len(header) < 9 or header[3] != HTTP2_SETTINGS:
        raise ConnectionError(
            f"--ray-address {address}: something answers there, but not a Ray head (no gRPC reply); "
            + expected
        )


def _read(sock: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes from ``sock`` (fewer when it closes first)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def check_address(address: str) -> None:
    """ConnectionError naming ``--ray-address`` (bad input: the run dir does not exist yet) unless a Ray head
    answers at ``address`` (``check_reachable``) and its GCS demands a token (token_auth.py). ``auto`` and
    ``ray://`` addresses are judged once joined (``check_joined``)."""
    check_reachable(address)
    if address == "auto" or "://" in address:
        return
    problem = token_problem("its GCS", address, GCS_METHOD)
    if problem:
        raise ConnectionError(
            f"--ray-address {address}: the Ray cluster there {problem}; expected a cluster started with "
            "RAY_AUTH_MODE=token on every node (docs/ray.md)"
        )


def token_problem(server: str, address: str, method: str) -> str | None:
    """Why the cluster fails the joined-cluster rule at ``server`` (named for the message), asked at
    ``address`` by a call of ``method`` without a token; None when it refuses that call (token_auth.py)."""
    try:
        if demands_token(address, method):
            return None
    except CannotTell as exc:
        return (
            f"cannot be judged: {server} ({address}) answered a call without a token with {exc}, which does "
            "not say whether token authentication is on"
        )
    return (
        f"has token authentication off: {server} ({address}) answered a call without a token, so anyone who "
        "reaches its ports can run code on its nodes"
    )


def check_start_env() -> None:
    """ValueError naming RAY_AUTH_MODE when it would start the run's own cluster without token
    authentication (Ray turns it on for a cluster it starts unless RAY_AUTH_MODE says otherwise)."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":  # as Ray reads it: set (even empty) means that mode
        raise ValueError(
            f"RAY_AUTH_MODE: {mode!r} is not allowed for the Ray cluster a run starts; expected token or "
            "unset (without token authentication anyone who reaches its ports can run code on it)"
        )


class Cluster(enum.Enum):
    """Which cluster a run is on, and so which rule judges it (``check``)."""

    STARTED = "started"  # a one-node cluster this run started: loopback only, token authentication on
    JOINED = "joined"  # the cluster ``--ray-address`` names: token authentication on, on every server
    CALLER = "caller"  # Ray initialised by the caller (a test, a notebook): the caller's to judge and end

    @property
    def connected_by_run(self) -> bool:
        """Whether the run made the connection, and so ends it (which stops a cluster it started)."""
        return self is not Cluster.CALLER


def connect(config: Config) -> Cluster:
    """Connect this process to the run's cluster: ``config.ray_address`` (``auto`` or HOST:PORT), or, when
    it is None, a new one-node cluster on loopback with a CPU per worker at least; judge it by its rule
    (``check``) before anything runs on it. Ray initialised by the caller is left alone (CALLER)."""
    if ray.is_initialized():
        return Cluster.CALLER
    start = config.ray_address is None
    if start:
        try:
            check_start_env()  # refused before any Ray process starts
        except ValueError as exc:
            raise BackendFailed("ray", str(exc)) from None
    else:
        check_reachable(config.ray_address)
    with loopback_kept(), sigterm_kept():
        ray.init(
            # "local" starts a cluster even when RAY_ADDRESS is set: no address means "start one here".
            address="local" if start else config.ray_address,
            num_cpus=max(config.workers, os.cpu_count() or 1) if start else None,
            _node_ip_address=LOOPBACK if start else None,
            namespace=f"a3c-{uuid.uuid4().hex[:8]}",
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=True,
            runtime_env={"env_vars": ONE_THREAD},  # one BLAS/OpenMP thread per actor (runtime/context.py)
        )
    cluster = Cluster.STARTED if start else Cluster.JOINED
    try:
        check(cluster)
    except BaseException:
        ray.shutdown()  # a cluster it started goes with the refusal (or a failed check); a joined one is left
        raise
    return cluster


@contextmanager
def sigterm_kept() -> Iterator[None]:
    """The caller's SIGTERM handler, kept across ``ray.init``: it installs one that exits with status 15 at
    once, which would end a run without its last checkpoint and summary (the trainer's handler stops it
    cleanly, exit 143)."""
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and handler is not None:
            signal.signal(signal.SIGTERM, handler)


def check(cluster: Cluster) -> None:
    """BackendFailed (the run stops, exit 1, one line) unless ``cluster`` passes its rule: ``check_started``
    or ``check_joined``. The caller's own Ray is not judged."""
    if cluster is Cluster.STARTED:
        check_started()
    elif cluster is Cluster.JOINED:
        check_joined()


def check_started() -> None:
    """BackendFailed unless the cluster this process started is private: token authentication on, every
    node advertising loopback, and no socket of this process tree listening on another address (read from
    the operating system, not taken from what the nodes say; where it cannot be read, a refusal)."""
    if is_token_auth_enabled is None:
        why = f"Ray {ray.__version__} cannot say whether token authentication is on"
        raise BackendFailed("ray", f"{why}; this a3c supports Ray 2.60 ({install_hint('ray')})")
    if not is_token_auth_enabled():
        raise BackendFailed(
            "ray",
            "the Ray cluster this run started has token authentication off (RAY_AUTH_MODE="
            f"{os.environ.get('RAY_AUTH_MODE', '')!r}); unset RAY_AUTH_MODE or set it to token",
        )
    exposed = exposed_listeners()
    if exposed is None:
        raise BackendFailed(
            "ray",
            "cannot tell what the Ray cluster this run started listens on (this system does not show a "
            "process's sockets); join a cluster with token authentication instead (--ray-address, "
            "docs/ray.md)",
        )
    where = exposed or sorted(node_addresses() - {LOOPBACK})
    if where:
        raise BackendFailed(
            "ray", f"the Ray cluster this run started listens on {', '.join(where)}, not only {LOOPBACK}"
        )


def check_joined() -> None:
    """BackendFailed unless every server of the cluster this process joined demands a token: its GCS and
    each live node's raylet, each asked by a call without one (token_auth.py). Cannot tell is a refusal."""
    try:
        servers = [("its GCS", ray.get_runtime_context().gcs_address, GCS_METHOD)]
        for node in ray.nodes():  # several nodes may share an address: each raylet is asked
            if node["Alive"]:
                host, port = node["NodeManagerAddress"], node["NodeManagerPort"]
                server = f"the raylet of node {host} {node['NodeID'][:8]}"
                servers.append((server, host_port(host, port), RAYLET_METHOD))
    except Exception as exc:  # noqa: BLE001 - any failure to list the servers is "cannot tell"
        raise BackendFailed(
            "ray", f"the Ray cluster this run joined cannot be judged: its servers cannot be listed ({exc})"
        ) from None
    for server, address, method in servers:
        problem = token_problem(server, address, method)
        if problem:
            raise BackendFailed(
                "ray",
                f"the Ray cluster this run joined {problem}; start every node with RAY_AUTH_MODE=token "
                "(docs/ray.md)",
            )


class Rechecks:
    """When a run judges its cluster again: once every worker has pushed an update (the processes, and
    their sockets, exist then), and the same way after each restart (a restarted actor may be a new process,
    on another node)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.restarts = 0
        self.to_exceed: np.ndarray | None = None  # each worker's update count to exceed; empty: none due

    def after_drain(self, updates: np.ndarray, restarts: int) -> None:
        """Given each worker's update count and the restarts so far, ``check`` when due (BackendFailed)."""
        if self.cluster is Cluster.CALLER:
            return
        if self.to_exceed is None or restarts != self.restarts:
            self.restarts, self.to_exceed = restarts, updates.copy()
        elif self.to_exceed.size and (updates > self.to_exceed).all():
            self.to_exceed = np.zeros(0)
            check(self.cluster)
