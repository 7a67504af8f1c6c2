"""A small MLP and random gradients for the optimizer and hand-off tests (tests/algo/test_optim.py,
tests/algo/test_hand_off.py, tests/runtime/test_counters.py)."""

from __future__ import annotations

import torch
from torch import nn


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def random_grads(model: nn.Module, steps: int, seed: int) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(p.shape, generator=g) for p in model.parameters()] for _ in range(steps)]


def assert_params_close(a: nn.Module, b: nn.Module, atol: float = 1e-6) -> None:
    for i, (p, q) in enumerate(zip(a.parameters(), b.parameters(), strict=True)):
        torch.testing.assert_close(p, q, rtol=0, atol=atol, msg=lambda m, i=i: f"parameter {i}: {m}")


def step_with(model: nn.Module, optimizer: torch.optim.Optimizer, grads: list[torch.Tensor | None]) -> None:
    for p, g in zip(model.parameters(), grads, strict=True):
        p.grad = None if g is None else g.clone()
    optimizer.step()


def run_both(ours, theirs, steps: int = 12, seed: int = 1) -> tuple[nn.Module, nn.Module]:
    """Step two identical models with the same gradients; at step 5 the first parameter has no gradient."""
    model_a, model_b = make_model(), make_model()
    assert_params_close(model_a, model_b, atol=0)
    opt_a, opt_b = ours(model_a.parameters()), theirs(model_b.parameters())
    for k, grads in enumerate(random_grads(model_a, steps, seed)):
        if k == 5:
            grads = [None, *grads[1:]]
        step_with(model_a, opt_a, grads)
        step_with(model_b, opt_b, grads)
    assert not torch.allclose(next(model_a.parameters()), next(make_model().parameters()))  # it did move
    return model_a, model_b
