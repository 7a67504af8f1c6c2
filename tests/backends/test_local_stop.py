"""The local backend's grace for its children at a stop: long after a budget stop of a long run (the evaluator
plays its final evaluation and rescores best.pt), short after an interrupt or a Ctrl-C meanwhile."""

from types import SimpleNamespace

import pytest

from a3c.backends.local import STOP_GRACE_S, LocalBackend
from a3c.runtime.counters import StopReason
from a3c.runtime.evaluator import FINAL_EVAL_GRACE_S


class FrozenClock:
    """``time.monotonic`` at a fixed instant, and a run clock that began ``trained_s`` before it."""

    def __init__(self, now: float, trained_s: float):
        self.now, self.trained_s = now, trained_s

    def monotonic(self) -> float:
        return self.now

    def elapsed(self) -> float:
        return self.trained_s


def grace_given(monkeypatch, reason: StopReason, trained_s: float, ctrl_c: bool = False) -> float:
    """Seconds from the stop to the deadline the Supervisor is given."""
    clock = FrozenClock(1000.0, trained_s)
    monkeypatch.setattr("a3c.backends.local.time.monotonic", clock.monotonic)
    deadlines = []
    backend = LocalBackend.__new__(LocalBackend)  # no children: only its stop() is under test
    backend.records = []
    backend.shared = SimpleNamespace(stop=SimpleNamespace(reason=reason), start_time=clock)
    backend.supervisor = SimpleNamespace(stop_all=lambda deadline: deadlines.append(deadline()))
    backend.stop(lambda: ctrl_c)
    assert len(deadlines) == 1
    return deadlines[0] - clock.now


@pytest.mark.parametrize("reason", [StopReason.MAX_SECONDS, StopReason.MAX_STEPS])
def test_a_budget_stop_gives_the_final_evaluation_a_tenth_of_a_long_runs_time(monkeypatch, reason):
    assert grace_given(monkeypatch, reason, trained_s=5400.0) == pytest.approx(540.0)
    assert grace_given(monkeypatch, reason, trained_s=120.0) == FINAL_EVAL_GRACE_S


def test_an_interrupt_or_a_ctrl_c_during_the_grace_gives_the_short_grace(monkeypatch):
    assert grace_given(monkeypatch, StopReason.INTERRUPTED, trained_s=5400.0) == STOP_GRACE_S
    assert grace_given(monkeypatch, StopReason.MAX_SECONDS, trained_s=5400.0, ctrl_c=True) == STOP_GRACE_S
