"""The Ray driver's evaluator: which failures of the evaluation actor count as restarts (no Ray cluster: the
actor and the wait for its play are stand-ins)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.support.extras import require_extra

require_extra("ray", "ray")

from ray.exceptions import ActorUnavailableError  # noqa: E402 - after the extra's guard

from a3c.backends.ray.evaluation import RemoteEvaluator  # noqa: E402

RESULT = (np.array([1.0, 2.0]), np.array([10, 20]), 0.5)  # returns, lengths, the actor's CPU seconds


class Actor:
    """What ``_play`` calls on the actor: ``play.remote`` (a ref it hands to ``_await``); ``sent`` records
    each play's arguments."""

    def __init__(self):
        self.sent: list[tuple] = []
        self.play = SimpleNamespace(remote=lambda *args: self.sent.append(args) or object())


def evaluator(answered: bool) -> RemoteEvaluator:
    """A RemoteEvaluator with only what ``_play`` reads; its actor answered since its last start or not."""
    ev = object.__new__(RemoteEvaluator)
    ev.actor, ev.flat, ev.obs_snapshot = Actor(), torch.zeros(3), None
    ev.config = SimpleNamespace(max_restarts=3, hang_timeout=600.0)
    ev.remote_cpu_s, ev.actor_restarts, ev.play_id = 0.0, 0, 0
    ev.actor_answered, ev.restarted_at = answered, time.monotonic()
    return ev


def test_a_play_sent_while_the_actor_restarts_is_sent_again_not_counted(monkeypatch):
    """After a restart, the new actor's first beat may answer before the play sent to the restarting actor
    fails as unavailable: that play was never the new actor's, so it is sent again, and no restart is
    counted (counting it spent a restart of the budget on every hang under load)."""
    ev = evaluator(answered=False)  # just restarted: Ray is starting the new actor
    outcomes = iter(["beat answers, then the play fails", "plays"])

    def wait(ref, should_stop):
        if next(outcomes) == "plays":
            return RESULT
        ev.actor_answered = True  # the new actor's beat came back first
        raise ActorUnavailableError("the actor is restarting", None)

    monkeypatch.setattr(ev, "_await", wait)
    monkeypatch.setattr("a3c.backends.ray.evaluation.BEAT_S", 0.0)
    returns, lengths = ev._play(2, 7, should_stop=lambda: False)
    assert ev.actor_restarts == 0 and ev.play_id == 2
    assert [(episodes, seed) for _, episodes, seed, *_ in ev.actor.sent] == [(2, 7), (2, 7)]  # the given seed
    np.testing.assert_array_equal(returns, RESULT[0])
    np.testing.assert_array_equal(lengths, RESULT[1])


def test_an_actor_that_was_up_and_becomes_unavailable_counts_as_a_crash(monkeypatch, capsys):
    ev = evaluator(answered=True)
    outcomes = iter(["unavailable", "plays"])

    def wait(ref, should_stop):
        if next(outcomes) == "plays":
            return RESULT
        raise ActorUnavailableError("the actor's node died", None)

    monkeypatch.setattr(ev, "_await", wait)
    ev._play(2, 7, should_stop=lambda: False)
    assert ev.actor_restarts == 1
    assert "the evaluator actor died (ActorUnavailableError); restarting it (1/3)" in capsys.readouterr().err


def test_past_the_restart_budget_the_run_fails_naming_the_evaluator(monkeypatch):
    from a3c.backends.ray.actor_calls import ActorFailed

    ev = evaluator(answered=True)
    ev.actor_restarts = 3

    def wait(ref, should_stop):
        raise ActorUnavailableError("gone", None)

    monkeypatch.setattr(ev, "_await", wait)
    with pytest.raises(ActorFailed, match="evaluator actor"):
        ev._play(2, 7, should_stop=lambda: False)
    assert ev.actor_restarts == 3  # the restarts made (the run's summary counts them), not the loss past them
