"""A supervisor that was not scheduled (the whole group stopped and continued: Ctrl-Z then fg, a Slurm
suspend, docker pause) gives every child a fresh timeout; a child that really stopped beating is still
killed, even under a supervisor that is slow at every poll. Driven on a clock the test moves: no process
runs and nothing sleeps."""

from __future__ import annotations

import os
import signal

import pytest

from a3c.runtime.silence import SilenceWatch
from a3c.runtime.supervisor import ChildSpec, Supervisor

HANG_S = 5.0


class ClockedHeartbeats:
    """Heartbeats on the test's clock: ``clock`` is what ``time.monotonic()`` would say."""

    def __init__(self, children: int):
        self.clock = 1000.0
        self.trainer = children
        self.stamps = [0.0] * (children + 1)

    def now(self) -> float:
        return self.clock

    def beat(self, slot: int) -> None:
        self.stamps[slot] = self.clock

    def clear(self, slot: int) -> None:
        self.stamps[slot] = 0.0

    def age(self, slot: int) -> float | None:
        return None if self.stamps[slot] == 0.0 else self.clock - self.stamps[slot]


class Running:
    """A child process that runs until killed; its sentinel is a pipe nobody writes (never ready)."""

    def __init__(self) -> None:
        self.sentinel, self._write_end = os.pipe()
        self.exitcode: int | None = None

    def is_alive(self) -> bool:
        return self.exitcode is None

    def kill(self) -> None:
        self.exitcode = -signal.SIGKILL

    def join(self, timeout: float | None = None) -> None:
        pass

    def close(self) -> None:
        os.close(self.sentinel)
        os.close(self._write_end)


@pytest.fixture
def supervised():
    """A Supervisor of two running children (slots 0 and 1), no restarts allowed, on the test's clock."""
    heartbeats = ClockedHeartbeats(2)
    specs = [ChildSpec(f"child {i}", i, print, lambda restart, conn: {}) for i in range(2)]
    supervisor = Supervisor(None, specs, heartbeats, lambda record: None, 0, HANG_S)
    for child in supervisor.children:
        child.process = Running()
        heartbeats.beat(child.spec.slot)
    yield supervisor, heartbeats
    for child in supervisor.children:
        child.process.close()


def poll(supervisor: Supervisor) -> None:
    supervisor.poll(0.0, stopped=lambda: False)


def killed(supervisor: Supervisor) -> list[str]:
    return [c.spec.name for c in supervisor.children if c.process.exitcode is not None]


def test_a_whole_group_stopped_past_the_hang_timeout_and_continued_kills_no_child(supervised):
    supervisor, heartbeats = supervised
    for _ in range(10):  # running normally: a beat from each child between polls
        heartbeats.clock += 0.1
        heartbeats.beat(0), heartbeats.beat(1)
        poll(supervisor)
    heartbeats.clock += 12.0  # SIGSTOP of the group for 12 s, then SIGCONT: the supervisor polls first
    poll(supervisor)
    assert (killed(supervisor), supervisor.failure) == ([], None)
    for _ in range(10):
        heartbeats.clock += 0.1
        heartbeats.beat(0), heartbeats.beat(1)
        poll(supervisor)
    assert (killed(supervisor), supervisor.failure) == ([], None)


def test_a_child_silent_since_the_pause_still_gets_its_timeout_and_then_is_killed(supervised):
    supervisor, heartbeats = supervised
    heartbeats.clock += 12.0  # the pause
    poll(supervisor)
    # The pause counts as 1 s at most (the slack beyond the expected wait): 3.5 s of polls more leave
    # child 1 (which never beats again, while child 0 does) 4.5 s silent, 1 s more kills it.
    for _ in range(35):
        heartbeats.clock += 0.1
        heartbeats.beat(0)
        poll(supervisor)
    assert killed(supervisor) == []
    for _ in range(10):
        heartbeats.clock += 0.1
        heartbeats.beat(0)
        poll(supervisor)
    assert killed(supervisor) == ["child 1"]
    assert "child 1 sent no heartbeat for 5 s and was killed" in supervisor.failure.traceback


def test_a_hung_child_is_found_under_a_supervisor_slow_at_every_poll(supervised):
    # Each poll 3 s after the last (a trainer that is slow, not stopped): 1 s of each gap counts, so a
    # child that stopped beating is killed at the 6th such poll (6 s > 5 s), not never.
    supervisor, heartbeats = supervised
    polls = 0
    while not killed(supervisor) and polls < 20:
        heartbeats.clock += 3.0
        heartbeats.beat(0)
        poll(supervisor)
        polls += 1
    assert (killed(supervisor), polls) == (["child 1"], 6)


def test_the_watch_credits_a_gap_once_and_as_far_as_each_silence_overlaps_it():
    watch = SilenceWatch(99.9)
    watch.passed(100.0, 0.1)
    assert watch.silence(0, 0.05, 0.0, 100.0) == pytest.approx(0.05)
    watch.passed(112.0, 0.1)  # a 12-s gap: 10.9 s of it beyond the expected 0.1 s and the 1 s of slack
    # Slot 0 beat before the gap: 12.05 s old, 10.9 s credited. Slot 1 beat late in it, 2 s before its end
    # (just before the stop, or while only the watcher was stopped: it cannot be told): 2 s credited.
    for _ in range(2):  # credited once, however often it is looked at
        assert watch.silence(0, 12.05, 0.0, 112.0) == pytest.approx(1.15)
        assert watch.silence(1, 2.0, 0.0, 112.0) == pytest.approx(0.0)
    watch.passed(112.1, 0.1)  # a normal round: nothing credited, the silences grow
    assert watch.silence(0, 12.15, 0.0, 112.1) == pytest.approx(1.25)
    assert watch.silence(1, 2.1, 0.0, 112.1) == pytest.approx(0.1)
    watch.restart(0)  # a restarted child's start-up silence counts from its start
    watch.passed(112.3, 0.1)
    assert watch.silence(0, None, 112.2, 112.3) == pytest.approx(0.1)
