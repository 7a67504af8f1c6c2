"""Where a run's tensors live: the ``device`` field (``auto``, ``cpu``, ``cuda``, ``cuda:N``) as a torch
device, checked against what this machine has before anything is created (docs/gpu.md)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from a3c.core.errors import BadInput

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

DEVICE_NAME = re.compile(r"auto|cpu|cuda(:\d+)?")
ALLOWED = "auto, cpu, cuda or cuda:N"


def is_device_name(name: object) -> bool:
    """Whether ``name`` is a value the ``device`` field takes (whatever this machine has)."""
    return isinstance(name, str) and DEVICE_NAME.fullmatch(name) is not None


def resolve_device(name: str, model: str, backend: str = "local") -> torch.device:
    """The torch device a run with ``device = name`` uses here, for its network ``model`` and ``backend``.

    ``auto``: the first GPU when CUDA is there and the network is not the MLP, else the CPU. The MLP acts
    through its numpy twin and takes its gradient in closed form, about 10x faster than torch on a CPU
    (docs/performance.md); a GPU gains nothing on matrices that small and costs a copy each way per step.
    On Ray ``auto`` is the CPU and a GPU is refused: its node groups share one model per machine on the CPU.
    BadInput (one line: the value, what is allowed here and why) for a GPU this machine does not have.
    """
    import torch

    if name == "auto":
        on_gpu = model != "mlp" and backend != "ray" and torch.cuda.is_available()
        return torch.device("cuda", 0) if on_gpu else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cpu":
        return device
    if backend == "ray":
        raise BadInput(
            f"device: {name!r} is not allowed with backend ray; expected auto or cpu (Ray's node groups "
            'train on the CPU; docs/gpu.md, "Several GPUs")'
        )
    if not torch.cuda.is_available():
        why = "a CPU-only build" if torch.version.cuda is None else "no NVIDIA driver or GPU found"
        raise BadInput(
            f"device: {name!r} is not allowed on this machine; expected auto or cpu (torch "
            f"{torch.__version__} sees no CUDA device: {why})"
        )
    count = torch.cuda.device_count()
    index = 0 if device.index is None else device.index
    if index >= count:
        raise BadInput(
            f"device: {name!r} is not allowed on this machine; expected auto, cpu, cuda or cuda:0 .. "
            f"cuda:{count - 1} ({count} CUDA device{'s' if count > 1 else ''})"
        )
    return torch.device("cuda", index)


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A numpy batch [N, ...] as a tensor on ``device``: the same memory on the CPU; on a GPU, copied through
    pinned host memory without waiting (torch's caching host allocator reuses the pinned blocks and keeps
    each until its copy is done, so the host may go on)."""
    import torch

    tensor = torch.from_numpy(array)
    if device.type == "cpu":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


class PinnedStage:
    """Observations [B, ...] to ``device`` through one pinned host buffer per row shape, kept, as many rows as
    the largest batch so far (greedy play's batch shrinks as games end: its first rows): the copy goes
    without waiting, and the buffer is rewritten only at the next call. The caller reads a result of each
    batch back to the host before that (a copy that waits for the work on the batch, which waited for the
    batch's own copy), so no copy from the buffer is in flight when it changes. On the CPU: the same
    memory."""

    def __init__(self, device: torch.device):
        self.device = device
        self.buffers: dict[tuple[tuple[int, ...], str], Any] = {}

    def __call__(self, array: np.ndarray) -> torch.Tensor:
        """``array`` [B, ...] as a tensor on the device (its copy may still be under way)."""
        import torch

        if self.device.type == "cpu":
            return torch.from_numpy(array)
        key = (array.shape[1:], array.dtype.str)
        buffer = self.buffers.get(key)
        if buffer is None or len(buffer) < len(array):
            dtype = torch.from_numpy(array[:0].reshape(0)).dtype
            buffer = self.buffers[key] = torch.empty(array.shape, dtype=dtype, pin_memory=True)
        rows = buffer[: len(array)]
        rows.numpy()[...] = array
        return rows.to(self.device, non_blocking=True)


def use_device(device: torch.device) -> None:
    """Make ``device`` this process's current GPU (nothing for the CPU): pinned buffers and torch's caches
    then open no context on GPU 0 in a process that works on another one."""
    import torch

    if device.type == "cuda":
        torch.cuda.set_device(device)


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s parameters (the CPU for a model without any)."""
    import torch

    return next((p.device for p in model.parameters()), torch.device("cpu"))


def out_of_memory_line(exc: BaseException) -> str | None:
    """One line for a GPU out of memory (``torch.OutOfMemoryError``) naming what to lower; None for any
    other exception."""
    import torch

    if not isinstance(exc, torch.OutOfMemoryError):
        return None
    first = next(iter(str(exc).strip().splitlines()), "out of memory")
    return (
        f"{first[:200]} — the GPU's memory is full: lower --workers, --envs-per-worker or the network's size "
        "(--set lstm_size=..., hidden_sizes, your network's layers), or train with --device cpu"
    )
