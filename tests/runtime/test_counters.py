"""Shared state across processes (a3c/runtime/counters.py): exact counters and their snapshots, the stop
signal, and a child's writes to the shared model, optimizer state, counters and stop signal seen by the
parent."""

from __future__ import annotations

import pytest
import torch

from a3c.algo.optim import SharedAdam, assert_shared, flatten_parameters
from a3c.runtime.context import child_context
from a3c.runtime.counters import Counters, StopReason, StopSignal
from tests.support import counters_child
from tests.support.small_model import assert_params_close, make_model, step_with

# -- (d), (e): counters and the stop signal ------------------------------------------------------------------


def test_counters_add_and_totals():
    counters = Counters(3)
    assert counters.total_steps == 0 and counters.total_updates == 0
    counters.add(0, 8)
    counters.add(0, 8)
    counters.add(2, 5)
    assert counters.steps.tolist() == [16, 0, 5]
    assert counters.updates.tolist() == [2, 0, 1]
    assert counters.total_steps == 21 and counters.total_updates == 3
    assert isinstance(counters.total_steps, int) and isinstance(counters.total_updates, int)
    assert counters.steps.is_shared() and counters.updates.is_shared()


def test_stop_signal_first_reason_wins():
    stop = StopSignal()
    assert not stop.is_set()
    assert stop.reason is StopReason.RUNNING
    stop.stop(StopReason.MAX_STEPS)
    stop.stop(StopReason.SOLVED)
    stop.stop(StopReason.FAILED)
    assert stop.is_set()
    assert stop.reason is StopReason.MAX_STEPS


def test_stop_reason_budget_kinds():
    assert {r for r in StopReason if r.is_budget} == {
        StopReason.SOLVED,
        StopReason.MAX_STEPS,
        StopReason.MAX_SECONDS,
    }


# -- (g): shared state really is shared across processes -----------------------------------------------------


@pytest.mark.slow
def test_child_process_changes_are_seen_by_parent():
    grad_value, fill_value, lr = 0.25, 7.0, 0.01
    model = make_model()
    flat = flatten_parameters(model, shared=True)  # as the trainer lays it out (build_shared)
    opt = SharedAdam([flat], lr=lr)
    assert_shared(model, opt)
    ctx = child_context()  # the trainer's: a fork of the forkserver, torch already imported
    counters = Counters(2)
    stop = StopSignal()
    # Make the parent's per-process numpy views exist: they must not travel to the child as copies.
    assert counters.total_steps == 0 and not stop.is_set()

    # What the parent expects: torch's Adam, one step with the same gradient, then the last parameter filled.
    expected = make_model()
    ref_opt = torch.optim.Adam(expected.parameters(), lr=lr)
    step_with(expected, ref_opt, [torch.full_like(p, grad_value) for p in expected.parameters()])
    with torch.no_grad():
        list(expected.parameters())[-1].fill_(fill_value)
    assert not torch.allclose(next(model.parameters()), next(expected.parameters()))  # not true before

    child = ctx.Process(
        target=counters_child.mutate_shared_state,
        args=(model, opt, counters, stop, grad_value, fill_value),
        daemon=True,
    )
    child.start()
    try:
        child.join(timeout=60)
        assert not child.is_alive(), "child did not finish within 60 s"
        assert child.exitcode == 0, (
            f"child failed with exit code {child.exitcode} (its stderr has the assertion)"
        )
    finally:
        if child.is_alive():
            child.kill()
            child.join(timeout=10)

    assert_params_close(model, expected)
    torch.testing.assert_close(list(model.parameters())[-1], torch.full((3,), fill_value))
    beta1, beta2 = opt.param_groups[0]["betas"]
    state = opt.state[flat]
    assert float(state["step"]) == 1.0
    torch.testing.assert_close(state["exp_avg"], torch.full_like(flat, (1 - beta1) * grad_value))
    torch.testing.assert_close(state["exp_avg_sq"], torch.full_like(flat, (1 - beta2) * grad_value**2))
    assert counters.steps.tolist() == [0, 8] and counters.total_updates == 1
    assert stop.is_set() and stop.reason is StopReason.SOLVED


def test_a_counters_snapshot_is_one_read_of_each_slot():
    # A worker adds while the trainer snapshots: the totals must be the sums of the slots the snapshot holds
    # (a checkpoint's global_step == its worker_steps' sum), never a second, later read.
    import sys
    import threading

    counters = Counters(2, base_steps=1000, base_updates=10)
    running = threading.Event()
    running.set()

    def worker() -> None:
        while running.is_set():
            counters.add(0, 32)

    thread = threading.Thread(target=worker)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a few hundred
    thread.start()
    try:
        torn = []
        for _ in range(1500):
            snap = counters.snapshot()
            if snap["global_step"] != 1000 + int(snap["worker_steps"].sum()):
                torn.append(snap["global_step"])
            if snap["updates"] != 10 + int(snap["worker_updates"].sum()):
                torn.append(snap["updates"])
    finally:
        running.clear()
        thread.join(timeout=10)
        sys.setswitchinterval(interval)
    assert not thread.is_alive()
    assert not torn, f"{len(torn)} of 1500 snapshots summed a different read than they copied"
