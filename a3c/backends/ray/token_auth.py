"""Whether a Ray server demands a token: asked of the server itself, not read from this process's settings.

Ray's token authentication is a rule each server applies to the calls it receives (its own
``RAY_AUTH_MODE``); a client's setting says nothing of the cluster it joins. So a3c makes one call without
a token, as an attacker would, to a read-only method of the server: a server with token authentication on
answers UNAUTHENTICATED before it runs the method; one with it off answers. Anything else (no connection,
an unknown method, a timeout) means a3c cannot tell, which callers treat as a refusal.

The call is a raw gRPC unary call with an empty body (every field at its default in protobuf), so it needs
``grpcio`` but none of Ray's generated stubs. With ``RAY_USE_TLS`` it is made over TLS with the certificates
Ray's own processes use (``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY``, ``RAY_TLS_CA_CERT``).
"""

from __future__ import annotations

import os
from pathlib import Path

# Read-only methods: the GCS's cluster id, a raylet's system config.
GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
RAYLET_METHOD = "/ray.rpc.NodeManagerService/GetSystemConfig"
PROBE_TIMEOUT_S = 10.0  # a server that answers nothing within this is "cannot tell"


class CannotTell(ConnectionError):
    """The server gave no answer that says whether it demands a token (the message says what it gave)."""


def demands_token(address: str, method: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the gRPC server at ``address`` (HOST:PORT) refuses ``method`` called without a token: True
    when it answers UNAUTHENTICATED, False when it answers the call. CannotTell otherwise."""
    import grpc

    channel = _channel(grpc, address)
    try:
        call = channel.unary_unary(method)  # bytes in, bytes out: no stub needed
        try:
            call(b"", timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.UNAUTHENTICATED:
                return True
            raise CannotTell(f"{code.name}: {exc.details() or 'no details'}") from None
        return False
    finally:
        channel.close()


def _channel(grpc, address: str):  # noqa: ANN001, ANN202 - grpc is imported lazily (an extra)
    if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return grpc.insecure_channel(address)
    try:
        chain, key, ca = (
            Path(os.environ[name]).read_bytes()
            for name in ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
        )
    except (KeyError, OSError) as exc:
        raise CannotTell(f"RAY_USE_TLS is on but its certificates cannot be read ({exc})") from None
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=chain)
    return grpc.secure_channel(address, credentials)
