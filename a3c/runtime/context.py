"""The multiprocessing context of the children: a forkserver with torch and a3c already imported.

Why not spawn: a spawned child imports torch afresh — about 2.5 s of CPU each on the 2-core dev machine, so
three children took ~4 s to start, more than CartPole takes to learn. The forkserver imports them once, in
a process of its own that starts while the trainer is still importing torch itself (``start_early``); each
child is then a fork of it, ready in milliseconds. A fork of the forkserver, not of the trainer: no threads,
locks or CUDA state of the trainer are copied (why plain fork is ruled out). This module imports
no torch, so the CLI can start the server before its own heavy imports.

multiprocessing starts a new forkserver when it finds the last one dead, at the next child's start and
with the environment of that moment: every start here goes through ``start_early`` (``child_context``'s
processes call it first), so a respawned server has the one-thread settings too.
"""

from __future__ import annotations

import os
from multiprocessing import forkserver
from multiprocessing.context import BaseContext, ForkServerContext, ForkServerProcess

# What the forkserver imports before it forks anything: everything a worker or the evaluator needs.
PRELOAD = ["a3c.runtime.server", "__main__", "a3c.runtime.worker", "a3c.runtime.evaluator"]

# One thread per child for every math library, read when the forkserver imports them. numpy's OpenBLAS
# otherwise starts a thread per core for a matmul of a few hundred rows: two workers on two cores then ran
# four spinning BLAS threads and fell from 32k to 5k env steps/s (measured, 16 envs per worker).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# The forkserver must never initialise CUDA: its forks could not use it. It imports ``__main__``, and a
# script's ``torch.cuda.is_available()`` at import would do so, unless torch asks NVML instead (torch's
# documented setting for this case). Children set their own device up after the fork (docs/gpu.md).
NO_CUDA_IN_SERVER = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
SERVER_ENV = {**ONE_THREAD, **NO_CUDA_IN_SERVER}


def start_early() -> None:
    """Start the forkserver now (it imports ``PRELOAD`` in parallel with the caller); idempotent."""
    # The forkserver is a new interpreter and takes this process's environment when it starts; this
    # process's own settings (and whatever else it starts later) are restored right after.
    saved = {name: os.environ.get(name) for name in SERVER_ENV}
    os.environ.update(SERVER_ENV)
    try:
        forkserver.set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class OneThreadProcess(ForkServerProcess):
    """A forkserver child whose start first makes sure the server runs with ``SERVER_ENV``."""

    @staticmethod
    def _Popen(process_obj):  # noqa: N802 - multiprocessing's name
        start_early()  # restarts a dead server here, with the settings, before multiprocessing would
        return ForkServerProcess._Popen(process_obj)


class OneThreadContext(ForkServerContext):
    """The forkserver context whose every process start goes through ``start_early``."""

    Process = OneThreadProcess


def child_context() -> BaseContext:
    """The context to start children with (the forkserver, started if ``start_early`` did not)."""
    start_early()
    return OneThreadContext()
