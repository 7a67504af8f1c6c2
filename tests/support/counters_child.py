"""Process targets for tests/runtime/test_counters.py, tests/runtime/test_context.py and
tests/algo/test_optim.py: they run in spawned children, so they live in a module of their own."""

from __future__ import annotations

import torch

from a3c.algo.optim import flat_view
from a3c.runtime.counters import Counters, StopReason, StopSignal


def mutate_shared_state(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    counters: Counters,
    stop: StopSignal,
    grad_value: float,
    fill_value: float,
) -> None:
    """Check that what arrived is in shared memory, then change it in place for the parent to see.

    One optimizer step with the gradient ``grad_value`` everywhere, then the last parameter filled with
    ``fill_value``, 8 steps counted for worker 1, and a SOLVED stop. Any failed check exits non-zero.
    """
    params = list(model.parameters())
    for i, p in enumerate(params):
        assert p.is_shared(), f"parameter {i} is not shared in the child"
    for i, state in enumerate(optimizer.state.values()):
        for key, value in state.items():
            assert value.is_shared(), f"optimizer state {key} of parameter {i} is not shared in the child"
    # The optimizer must step the very memory of the model that arrived with it: its one flat buffer.
    flat = flat_view(model)
    opt_params = [p for group in optimizer.param_groups for p in group["params"]]
    assert len(opt_params) == 1 and opt_params[0].data_ptr() == flat.data_ptr(), (
        "optimizer steps other memory"
    )
    assert counters.steps.is_shared() and counters.updates.is_shared()

    opt_params[0].grad = torch.full_like(flat, grad_value)
    optimizer.step()
    for state in optimizer.state.values():
        assert float(state["step"]) == 1.0
    with torch.no_grad():
        params[-1].fill_(fill_value)
    counters.add(1, 8)
    stop.stop(StopReason.SOLVED)


def report_threads(conn) -> None:
    """Send back what a child of the forkserver sees: its BLAS/OpenMP thread settings and torch's threads."""
    import os

    from a3c.runtime.child import ChildGuard
    from a3c.runtime.counters import Heartbeats

    ChildGuard(Heartbeats(1), 0, "a3c-test-child")
    conn.send(
        {
            "env": {
                k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            },
            "torch_threads": torch.get_num_threads(),
        }
    )


def keep_adding(model: torch.nn.Module, stop: StopSignal) -> None:
    """Add a tiny amount to every parameter in place until ``stop`` is set (a worker writing the weights)."""
    torch.set_num_threads(1)
    flat = flat_view(model)
    step = torch.full_like(flat, 1e-7)
    while not stop.is_set():
        flat.add_(step)
