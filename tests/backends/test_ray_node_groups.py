"""The driver's view of Ray node groups (a3c/backends/ray/node_groups.py): which failures count as a lost
group, that a lost incarnation's counts are kept exactly once, and what a restarted group starts from. No
Ray cluster: the group actors and Ray's waits are stand-ins."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.support.extras import require_extra

require_extra("ray", "ray")

from ray.exceptions import ActorDiedError, ActorUnavailableError  # noqa: E402 - after the extra's guard

import a3c.backends.ray.node_groups as groups_module  # noqa: E402
from a3c.backends.ray.node_groups import GroupSupervisor, Watch  # noqa: E402
from a3c.backends.ray.stats import RunStats  # noqa: E402

WORKERS = 4  # two groups of two


class Ref:
    """A call's result: its value, or the error getting it raises."""

    def __init__(self, value=None, error: BaseException | None = None):
        self.value, self.error = value, error


class Group:
    """A group actor stand-in: each ``drain`` hands out the next scripted answer; ``start`` is recorded."""

    def __init__(self, answers: list[Ref]):
        self.answers = iter(answers)
        self.starts: list[tuple] = []
        self.drain = SimpleNamespace(remote=lambda *args: next(self.answers))
        self.start = SimpleNamespace(remote=self._start)

    def _start(self, *args) -> Ref:
        self.starts.append(args)
        return Ref()


def reply(incarnation: str, steps: list[int], started: bool = True, exchanges: int = 0) -> Ref:
    """A drain's answer from a group of two workers that made ``steps`` each (one update per 10 steps)."""
    slots = np.array([steps, [s // 10 for s in steps], [0, 0]], np.int64)
    answer = {"incarnation": incarnation, "started": started, "records": [], "slots": slots, "stats": {}}
    answer |= {"exchanges": exchanges, "lags": [], "round_trips": [], "failure": None, "restarts": 0}
    return Ref(answer)


def groups(*scripts: list[Ref]) -> GroupSupervisor:
    """GroupSupervisor over stand-in actors (group i runs workers 2i, 2i+1), counting from a base of 1000
    steps."""
    g = object.__new__(GroupSupervisor)
    g.config = SimpleNamespace(max_restarts=3, hang_timeout=600.0, workers=WORKERS)
    optimizer = SimpleNamespace(state_dict=lambda: {"state": {}})
    counters = SimpleNamespace(base=torch.tensor([1000, 100, 0]))
    g.trainer, g.times = SimpleNamespace(optimizer=optimizer, counters=counters), (0.0, 0)
    g.cluster, g.lock = RunStats(None, None), threading.Lock()
    g.groups = [[0, 1], [2, 3]][: len(scripts)]
    g.actors = [Group(script) for script in scripts]
    g.watch = [Watch() for _ in scripts]
    g.slots = np.zeros((3, WORKERS), np.int64)
    g.carried = np.zeros((3, WORKERS), np.int64)
    g.stopping = False
    g.pending = [None] * len(scripts)

    def replace(i: int) -> None:  # the stand-in answers as its successor too
        g.watch[i].generation += 1

    g._replace = replace
    return g


@pytest.fixture(autouse=True)
def ray_calls(monkeypatch):
    def get(ref, timeout=None):
        if ref.error is not None:
            raise ref.error
        return ref.value

    monkeypatch.setattr(groups_module.ray, "get", get)
    monkeypatch.setattr(groups_module.ray, "wait", lambda refs, timeout=None, **_: (refs, []))
    monkeypatch.setattr(groups_module.ray, "kill", lambda actor, no_restart=True: None)


def drain(g: GroupSupervisor, times: int) -> list:
    records = []
    for _ in range(times):
        records += g.drain(0.1)[0]
    return records


def test_a_group_that_is_briefly_unavailable_is_not_lost_and_its_counts_are_not_doubled(capsys):
    unavailable = Ref(error=ActorUnavailableError("connection lost", None))
    g = groups([reply("a", [0, 0], started=False), reply("a", [50, 60]), unavailable, reply("a", [70, 80])])
    assert drain(g, 4) == []
    assert g.counts()[0, :2].tolist() == [70, 80]  # the same incarnation's cumulative counts, once
    assert g.watch[0].restarts == 0 and g.restarts == 0
    assert "warning" not in capsys.readouterr().err


def test_a_dead_group_counts_once_keeps_its_counts_once_and_restarts_from_them(capsys):
    died = Ref(error=ActorDiedError())
    still_restarting = Ref(error=ActorUnavailableError("restarting", None))
    g = groups([
        reply("a", [0, 0], started=False), reply("a", [50, 60], exchanges=7), died, still_restarting,
        reply("b", [0, 0], started=False), reply("b", [5, 5], exchanges=1),
    ])  # fmt: skip
    records = drain(g, 6)
    assert records == []
    assert g.watch[0].restarts == 1 and g.restarts == 1
    assert g.counts()[0, :2].tolist() == [55, 65]  # the lost incarnation's 50 and 60, then the new one's 5
    err = capsys.readouterr().err
    assert err.count("warning: node group 0 died (ActorDiedError); restarting it (1/3)") == 1, err
    first, second = g.actors[0].starts
    assert first[1] == [1000, 100, 0]  # the run's base
    assert second[1] == [1000 + 110, 100 + 11, 0]  # and what the lost incarnation did
    assert second[3][-1] == 1  # its workers' seeds: the streams of a first restart
    assert g.watch[0].exchanges == 7  # the lost incarnation's exchanges are kept


def test_a_new_incarnation_seen_without_an_error_is_a_loss_too(capsys):
    g = groups([reply("a", [0, 0], started=False), reply("a", [50, 60]), reply("b", [0, 0], started=False)])
    drain(g, 3)
    assert g.watch[0].restarts == 1
    assert "warning: node group 0 was restarted; restarting it (1/3)" in capsys.readouterr().err
    assert g.counts()[0, :2].tolist() == [50, 60]


def test_a_restarted_group_starts_from_its_own_lost_counts_not_the_others():
    died = Ref(error=ActorDiedError())
    live = reply("x", [40, 40])
    g = groups(
        [reply("a", [0, 0], started=False), reply("a", [10, 10]), died, reply("b", [0, 0], started=False),
         reply("b", [1, 1]), reply("b", [2, 2])],
        [reply("x", [0, 0], started=False), live, live, live, died, reply("y", [0, 0], started=False)],
    )  # fmt: skip
    drain(g, 6)
    assert g.counts()[0].tolist() == [12, 12, 40, 40]
    restart = g.actors[1].starts[1]
    assert restart[1] == [1000 + 80, 100 + 8, 0]  # group 1's own lost 80 steps; group 0's are its slots


def test_past_its_restart_budget_a_group_fails_the_run_naming_it():
    died = Ref(error=ActorDiedError())
    script = [reply("a", [0, 0], started=False)]
    for incarnation in "bcd":
        script += [died, reply(incarnation, [0, 0], started=False)]
    script.append(died)
    g = groups(script)
    records = drain(g, len(script))
    (error,) = records
    assert error.source == "node 0" and "past its restart budget" in error.traceback
    assert g.restarts == 3  # the restarts made (the run's summary counts them), not the loss past them


def test_a_replacement_that_dies_before_it_answers_is_a_new_loss(capsys):
    died = Ref(error=ActorDiedError())
    g = groups(
        [reply("a", [0, 0], started=False), reply("a", [5, 5]), died, died, reply("c", [0, 0], started=False)]
    )
    assert drain(g, 5) == []
    assert g.watch[0].restarts == 2  # the first actor's death, then its replacement's
    assert capsys.readouterr().err.count("warning: node group 0 died") == 2


def test_a_start_that_fails_fails_the_run_naming_the_group():
    g = groups([reply("a", [0, 0], started=False), reply("a", [0, 0], started=False)])
    g.actors[0].start = SimpleNamespace(remote=lambda *args: Ref(error=RuntimeError("/dev/shm is full")))
    (error,) = drain(g, 2)
    assert error.source == "node 0" and "could not start" in error.traceback and "/dev/shm" in error.traceback


def test_workers_split_over_the_nodes_in_near_equal_groups_and_each_group_is_pinned_to_its_node(monkeypatch):
    spawned = []
    monkeypatch.setattr(GroupSupervisor, "_spawn", lambda self, i: spawned.append((i, self.node_ids[i])) or i)
    config = SimpleNamespace(workers=3, to_dict=dict)
    trainer = SimpleNamespace(config=config, start_time=0.0, spaces=None)
    g = GroupSupervisor(trainer, ["head", "second"], [], [], RunStats(None, None), threading.Lock(), 0)
    assert g.groups == [[0, 1], [2]] and spawned == [(0, "head"), (1, "second")]
    assert g.slots.shape == g.carried.shape == (3, 3)  # (steps, updates, skipped) of each of the 3 workers


def test_a_checkpoints_moments_come_from_the_first_group_to_answer_not_after_a_hung_ones_wait(monkeypatch):
    from a3c.backends.ray.node_groups import first_moments

    g = groups([], [])
    hung, answered = Ref(), Ref({"exp_avg": np.ones(3)})
    g.actors[0].optimizer_state = SimpleNamespace(remote=lambda: hung)
    g.actors[1].optimizer_state = SimpleNamespace(remote=lambda: answered)

    def wait(refs, num_returns=1, timeout=None):
        ready = [r for r in refs if r is answered][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(ref, timeout=None):
        assert ref is answered and timeout == 0, "waited on the hung group's answer"
        return ref.value

    monkeypatch.setattr(groups_module.ray, "wait", wait)
    monkeypatch.setattr(groups_module.ray, "get", get)
    assert first_moments(g) is answered.value
