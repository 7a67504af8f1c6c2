"""How long a heartbeat has been silent, not counting time its watcher itself was not running.

A process group stopped and continued (Ctrl-Z then ``fg``, a Slurm suspend, ``docker pause``) comes back
with every heartbeat as old as the pause: a watcher that compared ages with its timeout would kill every
child as hung (or every child would think its trainer hung). The rule here counts what the watcher saw, as
Ray's health checks count missed checks rather than raw age: a gap between two looks of the watcher far
longer than it waits between looks means the watcher was not scheduled, and that excess is credited to
every slot's silence, as far as the silence overlaps the gap (a beat just before the stop, late in the gap,
is as old as the stop). What a slot's own process did meanwhile cannot be told, so it gets a fresh
timeout. A watcher that is merely slow every time still counts ``expected + UNSCHEDULED_S`` seconds per
look, so a hung child is still found, only later. No SIGCONT handler is needed: a cgroup freeze (``docker
pause``) sends none, and the gap is seen either way.
"""

from __future__ import annotations

from dataclasses import dataclass

# Beyond the wait a watcher expects between two looks, this much more means it was not scheduled (stopped,
# frozen, swapped out): far beyond the trainer's 0.1-s tick, far below any hang timeout (>= 5 s).
UNSCHEDULED_S = 1.0


@dataclass
class _Slot:
    beat_at: float | None = None  # the watcher's time of the last beat it saw (None: none yet)
    credit: float = 0.0  # seconds of that silence the watcher was not scheduled
    credited: int = -1  # the round whose gap was last credited (once per round, however often it looks)


class SilenceWatch:
    """Silence of heartbeat slots as one watcher sees it, its own unscheduled gaps left out.

    Call ``passed(now, expected)`` once per round of looks (``expected``: the seconds the watcher meant to
    wait since the previous round), then ``silence(slot, age, now)`` for each slot it watches.
    """

    def __init__(self, now: float) -> None:
        self.slots: dict[int, _Slot] = {}
        self.last_round = now  # the watcher starts looking: the first gap is measured from here
        self.gap_start = self.gap_end = self.excess = 0.0  # the last round's gap, and how far it overran
        self.round = 0

    def passed(self, now: float, expected: float) -> None:
        """A new round of looks at ``now``: the gap since the last round beyond ``expected +
        UNSCHEDULED_S`` is credited to every slot silent during it (up to how long it was)."""
        self.gap_start, self.gap_end = self.last_round, now
        self.excess = max(0.0, now - self.last_round - expected - UNSCHEDULED_S)
        self.last_round = now
        self.round += 1

    def restart(self, slot: int) -> None:
        """``slot``'s process was (re)started: forget its beats and credit."""
        self.slots[slot] = _Slot()

    def silence(self, slot: int, age: float | None, since: float, now: float) -> float:
        """Seconds ``slot`` has been silent as this watcher counts them: its heartbeat ``age`` (None before
        its first beat: then counted from ``since``, its start) less the gaps its watcher was not running."""
        state = self.slots.setdefault(slot, _Slot())
        beat_at = since if age is None else now - age
        # A newer beat starts a new silence (1 ms: the age is read on a clock a moment apart from ``now``).
        if state.beat_at is None or beat_at > state.beat_at + 1e-3:
            state.credit = 0.0
        state.beat_at = beat_at
        if state.credited != self.round:  # the last gap overran for this slot as far as it was silent in it
            state.credit += min(self.excess, max(0.0, self.gap_end - max(beat_at, self.gap_start)))
            state.credited = self.round
        return max(0.0, now - beat_at - state.credit)
