"""The run's own check of what its Ray cluster listens on, read from the operating system: a real process
tree with a socket on every interface against one on loopback, and a Ray process against a user's own."""

from __future__ import annotations

import socket
import subprocess
import sys

import psutil
import pytest

from a3c.backends.ray import listening as listening_module
from a3c.backends.ray.listening import exposed_listeners, is_loopback


@pytest.mark.parametrize(
    ("ip", "loopback"),
    [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("::ffff:127.0.0.1", True),
     ("0.0.0.0", False), ("::", False), ("192.0.2.2", False), ("fe80::1%eth0", False)],
)  # fmt: skip
def test_loopback_is_127_8_and_its_ipv6_forms(ip, loopback):
    assert is_loopback(ip) is loopback


@pytest.mark.parametrize(
    ("host", "folder", "exposed"),
    [("127.0.0.1", "ray", False), ("0.0.0.0", "ray", True), ("::", "ray", True), ("0.0.0.0", "mine", False)],
)
def test_a_ray_process_listening_on_every_interface_is_found(tmp_path, host, folder, exposed):
    # A child whose command line is in a folder named ray counts as Ray's; a user's own child does not.
    if ":" in host and not ipv6():
        pytest.skip("this host has no IPv6")
    script = tmp_path / folder / "child.py"
    script.parent.mkdir()
    family = "socket.AF_INET6" if ":" in host else "socket.AF_INET"
    script.write_text(
        f"import socket, sys\ns = socket.socket({family})\ns.bind(({host!r}, 0))\ns.listen()\n"
        "print(s.getsockname()[1], flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(child.stdout.readline())  # it listens now
        found = exposed_listeners()
    finally:
        child.stdin.close()
        child.wait(timeout=10)
        child.stdout.close()
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert (shown in found) is exposed, found


def ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::", 0))
    except OSError:
        return False
    return True


def test_a_system_that_hides_sockets_is_cannot_tell(monkeypatch):
    def denied(self, kind="inet"):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(listening_module.psutil.Process, "net_connections", denied)
    assert exposed_listeners() is None
