"""The local backend's grace for its children at a stop: long after a budget stop of a long run (the evaluator
plays its final evaluation and rescores best.pt), short after an interrupt, a Ctrl-C meanwhile or the
evaluator's exit."""

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


def grace_given(
    monkeypatch, reason: StopReason, trained_s: float, ctrl_c: bool = False, evaluator_alive: bool = True
) -> float:
    """Seconds from the stop to the deadline the Supervisor is given."""
    clock = FrozenClock(1000.0, trained_s)
    monkeypatch.setattr("a3c.backends.local.time.monotonic", clock.monotonic)
    deadlines = []
    evaluator = SimpleNamespace(
        spec=SimpleNamespace(name="evaluator"), process=SimpleNamespace(is_alive=lambda: evaluator_alive)
    )
    backend = LocalBackend.__new__(LocalBackend)  # no children: only its stop() is under test
    backend.records = []
    backend.shared = SimpleNamespace(stop=SimpleNamespace(reason=reason), start_time=clock)
    backend.supervisor = SimpleNamespace(
        children=[evaluator], stop_all=lambda deadline: deadlines.append(deadline())
    )
    backend.stop(lambda: ctrl_c)
    assert len(deadlines) == 1
    return deadlines[0] - clock.now


@pytest.mark.parametrize("reason", [StopReason.MAX_SECONDS, StopReason.MAX_STEPS])
def test_a_budget_stop_gives_the_final_evaluation_a_tenth_of_a_long_runs_time(monkeypatch, capsys, reason):
    assert grace_given(monkeypatch, reason, trained_s=120.0) == FINAL_EVAL_GRACE_S
    assert capsys.readouterr().err == ""
    assert grace_given(monkeypatch, reason, trained_s=5400.0) == pytest.approx(540.0)
    assert capsys.readouterr().err == (
        f"{reason.name.lower()} reached: the final evaluation and best.pt's rescoring may take up to 540 s "
        "(Ctrl-C skips them)\n"
    )


def test_a_solve_an_interrupt_a_ctrl_c_or_the_evaluators_exit_give_the_short_grace(monkeypatch):
    assert grace_given(monkeypatch, StopReason.SOLVED, trained_s=5400.0) == FINAL_EVAL_GRACE_S
    assert grace_given(monkeypatch, StopReason.INTERRUPTED, trained_s=5400.0) == STOP_GRACE_S
    assert grace_given(monkeypatch, StopReason.MAX_SECONDS, trained_s=5400.0, ctrl_c=True) == STOP_GRACE_S
    gone = grace_given(monkeypatch, StopReason.MAX_SECONDS, trained_s=5400.0, evaluator_alive=False)
    assert gone == STOP_GRACE_S
