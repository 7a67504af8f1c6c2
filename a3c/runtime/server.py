"""Imported by the forkserver before the workers' modules (``a3c.runtime.context.PRELOAD``; multiprocessing
imports a script's ``__main__`` first), in it alone: what the server itself must be for its children.

It ignores the stop signals a terminal or a scheduler sends the whole process group (SIGTERM, SIGHUP; it
already ignores SIGINT): its children get ``PR_SET_PDEATHSIG`` on it (``a3c.runtime.child``), so its
death would kill them mid-update, while the trainer stops them in order. It ends when the trainer does:
it reads EOF on the pipe only the trainer holds open (each child closes its copy). And the one-thread
settings are in its environment whoever started it, for what it imports after this and its children.
"""

from __future__ import annotations

import os
import signal

from a3c.runtime.context import SERVER_ENV

for _signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_signum, signal.SIG_IGN)  # each child sets its own handlers (ChildGuard)
os.environ.update(SERVER_ENV)
