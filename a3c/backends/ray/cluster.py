"""The Ray cluster of a run: join the one ``--ray-address`` names, or start one on this machine that listens
on loopback only.

Why loopback needs help (Ray 2.60, read in its source): Ray replaces a loopback host (``127.0.0.1``,
``localhost``) in a node IP or a cluster address with this machine's external address
(``ray._private.services.resolve_ip_for_localhost``), so that a one-node cluster can be joined from other
machines; its servers then bind every interface. With the node IP kept at ``127.0.0.1`` they bind loopback
alone. ``loopback_kept`` keeps such a host as given, for a cluster a run starts and for an address that
names one (``--ray-address 127.0.0.1:PORT``, a head started with ``--node-ip-address=127.0.0.1``).

Token authentication is Ray's own (docs/ray.md): the driver passes nothing; it reads ``RAY_AUTH_MODE``,
``RAY_AUTH_TOKEN_PATH`` / ``RAY_AUTH_TOKEN`` from its environment like every Ray process.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import ray
import ray._private.services as ray_services

try:  # private to Ray 2.60, the version this a3c supports: without it no cluster passes ``check_private``
    from ray._private.authentication.authentication_utils import is_token_auth_enabled
except ImportError:
    is_token_auth_enabled = None

from a3c.backends.base import BackendFailed
from a3c.backends.ray.listening import exposed_listeners
from a3c.core.config import Config
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
            "run's own cluster on loopback; this a3c supports Ray 2.60 (pip install -e '.[ray]')",
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


def connect(config: Config) -> bool:
    """Connect this process to the run's cluster: ``config.ray_address`` (``auto`` or HOST:PORT), or, when
    it is None, a new one-node cluster on loopback with a CPU per worker at least. Returns whether it
    connected (so the run disconnects at its end, which also stops a cluster it started); False when Ray
    was already initialised by the caller (a test, a notebook), whose connection the run leaves alone."""
    if ray.is_initialized():
        return False
    start = config.ray_address is None
    if not start:
        check_reachable(config.ray_address)
    with loopback_kept():
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
    if start:
        try:
            check_private()
        except BackendFailed:
            ray.shutdown()  # the cluster it started goes with the refusal
            raise
    return True


def check_private() -> None:
    """BackendFailed (the run stops, exit 1, one line) unless the cluster this process started is private:
    token authentication on, every node advertising loopback, and no socket of this process tree listening
    on another address (read from /proc, not taken from what the nodes say)."""
    if is_token_auth_enabled is None:
        why = f"Ray {ray.__version__} cannot say whether token authentication is on"
        raise BackendFailed("ray", f"{why}; this a3c supports Ray 2.60 (pip install -e '.[ray]')")
    if not is_token_auth_enabled():
        raise BackendFailed(
            "ray",
            "the Ray cluster this run started has token authentication off (RAY_AUTH_MODE="
            f"{os.environ.get('RAY_AUTH_MODE', '')!r}); unset RAY_AUTH_MODE or set it to token",
        )
    advertised = sorted(node_addresses() - {LOOPBACK})
    exposed = exposed_listeners()
    if advertised or exposed:
        where = ", ".join(exposed or advertised)
        raise BackendFailed(
            "ray", f"the Ray cluster this run started listens on {where}, not only {LOOPBACK}"
        )
