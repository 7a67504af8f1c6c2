"""What a process tree actually listens on: the TCP sockets in LISTEN state that its Ray processes hold, read
from the operating system (psutil: /proc on Linux, the kernel's process info on macOS), not taken from what
Ray's nodes advertise. How a run proves that the Ray cluster it started listens on loopback only."""

from __future__ import annotations

import ipaddress

import psutil


def ray_processes(root: psutil.Process) -> list[psutil.Process]:
    """``root`` (the driver, which counts too) and those processes below it that are Ray's (its daemons,
    workers, actors, agents: a name Ray gives, or a command line in Ray's package), not a user's own
    children (a notebook's)."""
    found = [root]
    for process in root.children(recursive=True):
        try:
            name, command = process.name(), " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # gone meanwhile: it listens on nothing
        if name in ("gcs_server", "raylet") or name.startswith("ray::") or "/ray/" in command:
            found.append(process)
    return found


def listening(processes: list[psutil.Process]) -> list[tuple[str, int]]:
    """(IP, port) of each TCP socket in LISTEN state that ``processes`` hold. psutil.AccessDenied propagates:
    a process whose sockets cannot be read proves nothing."""
    found = []
    for process in processes:
        try:
            connections = process.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        found += [(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN]
    return found


def host_port(host: str, port: int) -> str:
    """``HOST:PORT``, an IPv6 host in brackets (``[::]:PORT``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(ip: str) -> bool:
    """Whether ``ip`` is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.x.x)."""
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def exposed_listeners(pid: int | None = None) -> list[str] | None:
    """``IP:PORT`` of each socket the Ray processes below ``pid`` (default: this process) listen on outside
    loopback (``[::]:PORT`` for every interface); None where the operating system does not say (psutil
    cannot read a process's sockets)."""
    try:
        sockets = listening(ray_processes(psutil.Process(pid)))
    except (psutil.Error, NotImplementedError, OSError):  # denied, or not supported here: cannot tell
        return None
    return sorted(host_port(ip, port) for ip, port in sockets if not is_loopback(ip))
