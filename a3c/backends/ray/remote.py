"""What every actor and the driver share: start-up limits, waits, failures, and how arrays cross to torch.

It imports no torch at the top: the parameter shards import it and hold numpy arrays only, so that a shard's
process starts without torch (docs/ray.md)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import numpy as np
import ray

from a3c.backends.base import BackendFailed

if TYPE_CHECKING:
    import torch

STARTUP_TIMEOUT_S = 120.0  # an actor's first answer waits for Ray to start its process and import torch


# Fault injection for tests/backends/test_ray*.py only: an actor named by this environment variable blocks in
# one of its methods (see ``injected_hang``). Nothing sets it outside the tests; unset, it costs one lookup.
HANG_VAR = "A3C_TEST_HANG"


HANG_S = 3600.0  # the injected hang; the driver must notice it and kill the actor long before
INJECTED_HANG_TIMEOUT_S = 5.0  # the driver's wait for that actor then (``wait_limit``): not the healthy ones'


def injected_hang(actor: str) -> None:
    """Block (a test's injected hang) when ``A3C_TEST_HANG`` names ``actor``, in its first incarnation only:
    the actor that Ray restarts in its place goes on."""
    if os.environ.get(HANG_VAR) == actor and not ray.get_runtime_context().was_current_actor_reconstructed:
        time.sleep(HANG_S)


def wait_limit(hang_timeout: float, starting: bool, hanging: str = "") -> float:
    """How long to wait for an actor: ``hang_timeout``, or at least STARTUP_TIMEOUT_S while it may still be
    starting (before its first answer, or its loop's first seconds); INJECTED_HANG_TIMEOUT_S instead while
    it is ``hanging`` (its name) where the hang a test injects with ``A3C_TEST_HANG`` blocks."""
    if hanging and os.environ.get(HANG_VAR) == hanging:
        hang_timeout = INJECTED_HANG_TIMEOUT_S
    return max(hang_timeout, STARTUP_TIMEOUT_S) if starting else hang_timeout


class ActorFailed(BackendFailed):
    """An actor that hung or died beyond what a restart can mend: the run fails naming ``source``. (Not an
    OSError, as Ray's GetTimeoutError is: the trainer treats an OSError at a checkpoint as a full disk.)"""


def writable_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over ``array``; Ray hands arrays over read-only (zero-copy), so those are copied first."""
    import torch  # here, not at the top: see the module's docstring

    return torch.from_numpy(np.require(array, requirements="W"))
