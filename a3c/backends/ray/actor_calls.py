"""Calls between the driver and the actors, shared by both sides: how long to wait for an answer
(``wait_limit``, with the start-up allowance), a failure no restart mends (``ActorFailed``), and an array
that crossed a call made writable for torch (``writable_tensor``)."""

from __future__ import annotations

import numpy as np
import torch

from a3c.backends.base import BackendFailed
from a3c.runtime.supervisor import STARTUP_TIMEOUT_S


def wait_limit(hang_timeout: float, starting: bool) -> float:
    """How long to wait for an actor: ``hang_timeout``, or at least STARTUP_TIMEOUT_S while it may still be
    starting (before its first answer, or its loop's first seconds)."""
    return max(hang_timeout, STARTUP_TIMEOUT_S) if starting else hang_timeout


class ActorFailed(BackendFailed):
    """An actor that hung or died beyond what a restart can mend: the run fails naming ``source``. (Not an
    OSError, as Ray's GetTimeoutError is: the trainer treats an OSError at a checkpoint as a full disk.)"""


def writable_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over ``array``; Ray hands arrays over read-only (zero-copy), so those are copied first."""
    return torch.from_numpy(np.require(array, requirements="W"))
