"""The shared step: every parameter of a model as a view into ONE flat buffer and its gradient into another
(``flatten_parameters``, ``attach_flat_grad``, ``GradViewGuard``, ``clip_flat_grad``), the optimizers whose
state lives in shared memory and step that buffer lock-free (``SharedAdam``, ``SharedRMSprop``), and the
learning-rate schedules over a run's budgets (``scheduled_lr``).

Why one flat buffer: torch costs about 5 µs per op on small tensors, and an optimizer step, a gradient clip or
a weight pull is several ops per parameter tensor. Over one flat buffer each of them is a handful of ops
whatever the number of layers (measured for the CartPole MLP: SharedAdam 276 → ~40 µs, clip 150–340 →
~15 µs, pull 60 → 4 µs). The math is unchanged: the same numbers, laid out end to end. The parameters
stay ``nn.Parameter`` objects of the model (autograd, ``state_dict`` and checkpoints see nothing new); only
their storage moves. A flat buffer in shared memory crosses a spawn as one storage, so a child finds it again
with ``flat_view``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

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
    return torch.empty(0, dtype=first.dtype, device=first.device).set_(storage, start, (offset - start,))


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
                "flat buffer in place instead (a3c/algo/optim.py attach_flat_grad)"
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


class SharedOptimizer:
    """What these optimizers need of ``torch.optim.Optimizer``: ``param_groups``, ``state`` (keyed by
    parameter) and a ``state_dict()`` in torch's layout, so checkpoints look the same.

    Not torch's class itself: its ``__init__`` imports ``torch._dynamo`` on first use, which took 2.5 s on the
    dev machine, on the critical path of every run, for features these optimizers do not use.
    """

    def __init__(self, params: Iterable[torch.Tensor], defaults: dict[str, Any]):
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = [{**defaults, "params": list(params)}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: tensor}}, "param_groups": [{hyperparameters, "params": [index]}]}."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        return {
            "state": {index[id(p)]: dict(s) for p, s in self.state.items()},
            "param_groups": [
                {
                    **{k: v for k, v in g.items() if k != "params"},
                    "params": [index[id(p)] for p in g["params"]],
                }
                for g in self.param_groups
            ],
        }


class SharedAdam(SharedOptimizer):
    """Adam (Kingma & Ba 2015) with ``step``, ``exp_avg`` and ``exp_avg_sq`` in shared memory.

    The update is torch.optim.Adam's (no amsgrad, no weight decay); the bias correction uses the shared
    per-parameter ``step``, so it counts every worker's updates, not one process's.
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p] = {}
                state["step"] = torch.zeros((), dtype=torch.float64).share_memory_()
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format).share_memory_()
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format).share_memory_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a ``.grad``."""
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self.state[p] for p in params]
            grads = [p.grad for p in params]
            exp_avgs = [s["exp_avg"] for s in states]
            exp_avg_sqs = [s["exp_avg_sq"] for s in states]
            # One multi-tensor op per formula instead of one op per parameter: measured 538 → 276 µs per
            # step for the CartPole model (torch's per-op overhead dominates such small tensors).
            steps = [s["step"] for s in states]
            torch._foreach_add_(steps, 1)
            step_values = [s.item() for s in steps]  # the shared steps: every worker's updates count
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
            denoms = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denoms, [math.sqrt(1 - beta2**step) for step in step_values])
            torch._foreach_add_(denoms, group["eps"])
            step_sizes = [-group["lr"] / (1 - beta1**step) for step in step_values]
            torch._foreach_addcdiv_(params, exp_avgs, denoms, step_sizes)


class SharedRMSprop(SharedOptimizer):
    """RMSProp with the running mean of squared gradients shared by all workers ("shared RMSProp" of the
    A3C paper, Mnih et al. 2016, which found it more robust than per-worker statistics).

    Two forms (not centered, no momentum):

    - torch's (``tf_style=False``): E[g²] starts at 0 and θ ← θ − lr · g / (√E[g²] + eps). Its first steps
      are about 10·lr per weight whatever the gradient's size (E[g²] = 0.01·g² after one step).
    - TensorFlow's (``tf_style=True``, Stable-Baselines3's ``RMSpropTFLike``, what its zoo trains A2C on
      Atari with): E[g²] starts at 1 and θ ← θ − lr · g / √(E[g²] + eps). The first steps are lr·g, a
      warm-up that fades as E[g²] forgets its start (0.99ⁿ). On Pong from pixels torch's form killed
      every unit of the first conv layer within the first minutes (the value then a constant, explained
      variance 0.000 for 1.46M steps); docs/log/dev-notes.md, "Presets".
    """

    # eps 1e-5 and alpha 0.99 are Stable-Baselines3 A2C's RMSprop settings (its ``rms_prop_eps``). The step
    # is lr·g/(√E[g²] + eps): eps bounds it where gradients are tiny. With Adam's 1e-8 (which the config
    # used to pass to both) a parameter whose gradients are ~1e-6 moves as fast as one with large ones.
    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float = 7e-4,
        alpha: float = 0.99,
        eps: float = 1e-5,
        tf_style: bool = False,
    ):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, tf_style=tf_style))
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p] = {}
                state["step"] = torch.zeros((), dtype=torch.float64).share_memory_()
                start = torch.ones_like if tf_style else torch.zeros_like
                state["square_avg"] = start(p, memory_format=torch.preserve_format).share_memory_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a ``.grad``."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] += 1
                square_avg = state["square_avg"]
                square_avg.mul_(group["alpha"]).addcmul_(p.grad, p.grad, value=1 - group["alpha"])
                if group["tf_style"]:
                    denom = square_avg.add(group["eps"]).sqrt_()
                else:
                    denom = square_avg.sqrt().add_(group["eps"])
                p.addcdiv_(p.grad, denom, value=-group["lr"])


def make_optimizer(
    name: str, params: Iterable[torch.Tensor], lr: float, eps: float | None = None
) -> SharedOptimizer:
    """The shared optimizer called ``name`` ("adam", "rmsprop" or "rmsprop_tf": see ``SharedRMSprop``);
    ``eps`` None: that optimizer's own default (Adam 1e-8 as in Kingma & Ba and torch; RMSprop 1e-5 as in
    Stable-Baselines3's A2C)."""
    kwargs = {} if eps is None else {"eps": eps}
    if name == "adam":
        return SharedAdam(params, lr=lr, **kwargs)
    if name in ("rmsprop", "rmsprop_tf"):
        return SharedRMSprop(params, lr=lr, tf_style=name == "rmsprop_tf", **kwargs)
    raise ValueError(f"optimizer: {name!r} is not one of adam, rmsprop, rmsprop_tf")


def shared_tensors(model: nn.Module, optimizer: SharedOptimizer) -> list[torch.Tensor]:
    """Every tensor that must be in shared memory: parameters and optimizer state."""
    tensors = list(model.parameters())
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return tensors


def assert_shared(model: nn.Module, optimizer: SharedOptimizer) -> None:
    """Raise if any parameter or optimizer-state tensor is not in shared memory (asserted, not assumed)."""
    private = [t.shape for t in shared_tensors(model, optimizer) if not t.is_shared()]
    if private:
        raise RuntimeError(f"{len(private)} tensors are not in shared memory: {private}")


def non_finite_counts(model: nn.Module) -> dict[str, int]:
    """NaN/inf values per parameter of ``model``, read from a copy: a parameter in shared memory that a worker
    is writing must be read once per value. ``torch.isfinite`` reads each value twice (x == x and |x| != inf)
    and reports one that changed between the reads as non-finite: measured on a tensor under a concurrent
    ``add_``, about half of all checks saw a "NaN" that never existed (tests/algo/test_optim.py)."""
    return {name: int((~torch.isfinite(p.detach().clone())).sum()) for name, p in model.named_parameters()}


def scheduled_lr(
    lr: float,
    schedule: str,
    steps: int,
    max_steps: int | None,
    seconds: float = 0.0,
    max_seconds: float | None = None,
    decay_start: float = 0.0,
) -> float:
    """The learning rate of a run at ``steps`` env steps and ``seconds`` of its wall time: ``lr`` itself
    (``constant``), or decayed linearly from ``lr`` to 0 at the end of its budget (``linear``: CleanRL's
    ``anneal_lr``, Stable-Baselines3's ``linear_schedule``), never below 0. With ``decay_start`` s in
    [0, 1) (``Config.validate`` refuses any other) the linear rate stays ``lr`` for the first share s of
    the budget and decays over the rest: a fast first phase at the full rate, then the fine-tuning a
    falling rate gives.

    The linear decay follows whichever budget set (``max_steps``, ``max_seconds``) is further along: the run
    ends at the first one reached, and the rate should be 0 there, not halfway down."""
    if schedule == "constant":
        return lr
    if schedule == "linear":
        fractions = [steps / max_steps] if max_steps is not None else []
        if max_seconds is not None:
            fractions.append(seconds / max_seconds)
        if not fractions:
            raise ValueError("a linear schedule needs max_steps or max_seconds")
        left = (1.0 - max(fractions)) / (1.0 - decay_start)
        return lr * min(1.0, max(0.0, left))  # never above lr, whatever a clock said
    raise ValueError(f"unknown lr schedule {schedule!r}")
