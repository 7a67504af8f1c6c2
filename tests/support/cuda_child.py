"""A child process's side of the CUDA sharing test (tests/gpu): a top-level target, as a forkserver child
needs one."""

from __future__ import annotations

from multiprocessing.connection import Connection

import torch
from torch import nn

from a3c.algo.optim import flat_view


def add_one_to_the_shared_weights(model: nn.Module, conn: Connection) -> None:
    """Add 1 to every weight of ``model`` in place (the trainer's memory, when it came by CUDA IPC), then
    report the device this process saw it on."""
    flat = flat_view(model)
    flat.add_(1.0)
    torch.cuda.synchronize()
    conn.send(str(flat.device))
    conn.close()
