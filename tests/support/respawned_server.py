"""Run as ``python -m tests.support.respawned_server`` by tests/runtime/test_context.py: start the children's
forkserver, SIGKILL it, start a child (multiprocessing starts a new server for it) and print, as JSON, what
that child sees before any a3c code runs in it. The caller's own settings are 4 threads per library."""

from __future__ import annotations

import json
import os
import select
import signal
from multiprocessing import forkserver

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def report(conn) -> None:
    """What a child sees of its server's settings: the environment, torch's threads. (torch is imported here,
    in the child, where the server's preload already did: this process never needs it, and importing it
    took 2-3 CPU-s of the test.)"""
    import torch

    conn.send({"env": {k: os.environ.get(k) for k in THREAD_VARS}, "torch_threads": torch.get_num_threads()})


def main() -> None:
    from a3c.runtime.context import child_context

    os.environ.update(dict.fromkeys(THREAD_VARS, "4"))
    ctx = child_context()
    first = forkserver._forkserver._forkserver_pid
    pidfd = os.pidfd_open(first)
    os.kill(first, signal.SIGKILL)
    assert select.select([pidfd], [], [], 60)[0], "the forkserver did not die within 60 s of its SIGKILL"
    os.close(pidfd)
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=report, args=(writer,))
    child.start()
    writer.close()
    assert reader.poll(120), "the child sent nothing within 120 s"
    seen = reader.recv()
    child.join(timeout=30)
    respawned = forkserver._forkserver._forkserver_pid
    print(json.dumps({**seen, "respawned": respawned not in (None, first), "exitcode": child.exitcode}))


if __name__ == "__main__":
    main()
