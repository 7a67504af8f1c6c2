"""What a process tree actually listens on, read from Linux's /proc: the TCP sockets in LISTEN state that
the processes hold, and their local addresses. How a run proves that the Ray cluster it started listens on
loopback only, whatever the addresses its nodes advertise."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # the TCP state column of /proc/net/tcp{,6}


def descendants_and_self(pid: int) -> set[int]:
    """``pid`` and every live process below it (from each process's parent in /proc/PID/stat)."""
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, frontier = {pid}, [pid]
    while frontier:
        frontier = [c for p in frontier for c in children.get(p, ()) if c not in found]
        found.update(frontier)
    return found


def ray_processes(pids: set[int]) -> set[int]:
    """Those of ``pids`` that are Ray's (its daemons, workers, actors, agents: a command line in Ray's
    package, or a title Ray gives) and this process, the driver: not a user's own children (a notebook's)."""
    found = {os.getpid()} & pids
    for pid in pids:
        try:
            comm = (PROC / str(pid) / "comm").read_text().strip()
            command = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if comm in ("gcs_server", "raylet") or comm.startswith("ray::") or "/ray/" in command:
            found.add(pid)
    return found


def socket_inodes(pids: set[int]) -> set[str]:
    """The socket inodes the processes ``pids`` hold open (those we may read: our own processes)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(PROC / str(pid) / "fd"):
                target = os.readlink(PROC / str(pid) / "fd" / fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def parse_address(hex_address: str) -> str:
    """A /proc/net/tcp local address (``0100007F:1F90``, IPv6 as 32 hex digits) as ``IP:PORT``."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # The kernel prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{ipaddress.ip_address(words)}:{int(port, 16)}"


def listening(table: str, inodes: set[str]) -> list[str]:
    """The ``IP:PORT`` of each LISTEN socket of a /proc/net/tcp{,6} ``table`` whose inode is in ``inodes``."""
    found = []
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == LISTEN and fields[9] in inodes:
            found.append(parse_address(fields[1]))
    return found


def is_loopback(address: str) -> bool:
    """Whether ``IP:PORT`` is bound to a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.x.x)."""
    ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def exposed_listeners(pid: int | None = None) -> list[str] | None:
    """The non-loopback addresses the Ray processes below ``pid`` (default: this process, the driver, which
    counts too) listen on; None where /proc cannot tell (not Linux)."""
    if not (PROC / "net" / "tcp").exists():
        return None
    inodes = socket_inodes(ray_processes(descendants_and_self(os.getpid() if pid is None else pid)))
    addresses = []
    for name in ("tcp", "tcp6"):
        try:
            addresses += listening((PROC / "net" / name).read_text(), inodes)
        except OSError:
            continue
    return sorted(a for a in addresses if not is_loopback(a))
