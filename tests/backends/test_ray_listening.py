"""The run's own check of what its Ray cluster listens on, read from /proc: the parser on the kernel's
format, and a real process tree with a socket on every interface against one on loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from a3c.backends.ray.listening import exposed_listeners, is_loopback, listening, parse_address

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0
   2: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0
"""


def test_the_kernels_table_is_read_as_ip_and_port():
    assert parse_address("0100007F:1F90") == "127.0.0.1:8080"
    assert parse_address("00000000000000000000000001000000:0016") == "::1:22"
    assert listening(TABLE, {"111", "222", "333"}) == ["127.0.0.1:8080", "0.0.0.0:22"]  # 333: not LISTEN
    assert listening(TABLE, {"222"}) == ["0.0.0.0:22"]


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1:1", True), ("127.3.4.5:1", True), ("::1:1", True), ("::ffff:7f00:1:1", True),
     ("0.0.0.0:1", False), (":::1", False), ("192.0.2.2:1", False)],
)  # fmt: skip
def test_loopback_is_127_8_and_its_ipv6_forms(address, loopback):
    assert is_loopback(address) is loopback


@pytest.mark.parametrize(
    ("host", "folder", "exposed"),
    [("127.0.0.1", "ray", False), ("0.0.0.0", "ray", True), ("0.0.0.0", "mine", False)],
)
def test_a_ray_process_listening_on_every_interface_is_found(tmp_path, host, folder, exposed):
    # A child whose command line is in a folder named ray counts as Ray's; a user's own child does not.
    script = tmp_path / folder / "child.py"
    script.parent.mkdir()
    script.write_text(
        f"import socket, sys\ns = socket.socket()\ns.bind(({host!r}, 0))\ns.listen()\nprint(1, flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "1"  # it listens now
        found = exposed_listeners()
    finally:
        child.stdin.close()
        child.wait(timeout=10)
        child.stdout.close()
    assert bool([a for a in found if a.startswith("0.0.0.0:")]) is exposed, found
