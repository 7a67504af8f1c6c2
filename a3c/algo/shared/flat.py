"""All parameters of a model as views into ONE contiguous buffer, and their gradients into another.

Why: torch costs about 5 µs per op on small tensors, and an optimizer step, a gradient clip or a weight pull
is several ops per parameter tensor. Over one flat buffer each of them is a handful of ops whatever the
number of layers (measured for the CartPole MLP: SharedAdam 276 → ~40 µs, clip 150–340 → ~15 µs, pull
60 → 4 µs). The math is unchanged: the same numbers, laid out end to end.

The parameters stay ``nn.Parameter`` objects of the model (autograd, ``state_dict`` and checkpoints see
nothing new); only their storage moves. A flat buffer in shared memory crosses a spawn as one storage, so
a child finds it again with ``flat_view``.
"""

from __future__ import annotations

import torch
from torch import nn


def flatten_parameters(model: nn.Module, shared: bool = False) -> torch.Tensor:
    """Move every parameter of ``model`` into one new 1-D buffer (values kept) and return the buffer.

    With ``shared`` the buffer is in shared memory before any parameter points into it.
    """
    params = list(model.parameters())
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
    if shared:
        flat.share_memory_()
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat[offset : offset + n].view_as(p)
        offset += n
    return flat


def flat_view(model: nn.Module) -> torch.Tensor:
    """The 1-D buffer under a model laid out by ``flatten_parameters`` (also after a spawn), as a tensor
    that shares its memory. Raises ValueError for a model whose parameters are not laid out so."""
    params = list(model.parameters())
    first = params[0]
    storage = first.untyped_storage()
    offset = first.storage_offset()
    for p in params:
        if p.untyped_storage().data_ptr() != storage.data_ptr() or p.storage_offset() != offset:
            raise ValueError("the model's parameters are not views into one flat buffer (flatten_parameters)")
        if not p.is_contiguous():
            raise ValueError("a parameter of the model is not contiguous")
        offset += p.numel()
    start = first.storage_offset()
    return torch.empty(0, dtype=first.dtype).set_(storage, start, (offset - start,))


def attach_flat_grad(model: nn.Module, flat: torch.Tensor) -> torch.Tensor:
    """Give every parameter a ``.grad`` that is a view into one zeroed buffer shaped like ``flat``; return it.

    Backward then accumulates into these views in place (autograd adds into an existing ``.grad``), so
    ``grad.zero_()`` before each backward — never ``zero_grad(set_to_none=True)``, which would detach them.
    """
    grad = torch.zeros_like(flat)
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = grad[offset : offset + n].view_as(p)
        offset += n
    return grad


class GradViewGuard:
    """Checks, cheaply, that every parameter's ``.grad`` is still the view ``attach_flat_grad`` gave it.

    One ``zero_grad()`` (``set_to_none=True`` by default in torch 2.x) or a ``.grad = ...`` anywhere would
    detach them: backward would then fill fresh tensors while the flat buffer that is clipped and handed to
    the shared optimizer stays zero, and every update would silently be a momentum-only step. One
    ``data_ptr`` comparison per parameter (about 0.2 µs each) per update makes that a loud error instead.
    """

    def __init__(self, model: nn.Module, grad: torch.Tensor):
        self.params = list(model.parameters())
        self.expected = [self._ptr(p) for p in self.params]
        if self.expected != [grad.data_ptr() + o * grad.element_size() for o in self._offsets()]:
            raise ValueError("the model's .grad tensors are not views into the flat gradient buffer")

    def _offsets(self) -> list[int]:
        offsets, offset = [], 0
        for p in self.params:
            offsets.append(offset)
            offset += p.numel()
        return offsets

    @staticmethod
    def _ptr(p: torch.Tensor) -> int:
        return 0 if p.grad is None else p.grad.data_ptr()

    def check(self) -> None:
        """Raise RuntimeError, naming the parameters, if any ``.grad`` no longer views the flat buffer."""
        if [self._ptr(p) for p in self.params] != self.expected:
            moved = [i for i, p in enumerate(self.params) if self._ptr(p) != self.expected[i]]
            raise RuntimeError(
                f"parameters {moved} no longer have their .grad in the flat gradient buffer (a zero_grad() "
                "or a .grad assignment detached them); the update would apply a zero gradient. Zero the "
                "flat buffer in place instead (a3c/algo/shared/flat.py attach_flat_grad)"
            )


def clip_flat_grad(grad: torch.Tensor, max_norm: float) -> float:
    """Scale ``grad`` in place to an L2 norm of at most ``max_norm`` (≤ 0: no clip); return the norm before.

    The same rule as ``torch.nn.utils.clip_grad_norm_`` (coefficient max_norm / (norm + 1e-6), capped at 1)
    on the one flat gradient. A non-finite norm is returned as is and the gradient is left alone.
    """
    norm = float(torch.linalg.vector_norm(grad))
    if max_norm > 0 and norm > max_norm and norm != float("inf"):
        grad.mul_(max_norm / (norm + 1e-6))
    return norm
