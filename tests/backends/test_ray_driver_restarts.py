"""The Ray driver's worker loops: which failures count against a worker's restart budget (no Ray cluster: the
server, the worker actors and Ray's waits are stand-ins)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import require_extra

require_extra("ray", "ray")

from ray.exceptions import ActorUnavailableError  # noqa: E402 - after the extra's guard

import a3c.backends.ray.driver as driver_module  # noqa: E402
from a3c.backends.ray.cluster import Cluster, Rechecks  # noqa: E402
from a3c.backends.ray.driver import RayRun  # noqa: E402

WORKERS = 2


class Loop:
    """A worker loop's ref: running, or failed with ``error``."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


class Worker:
    """A worker actor stand-in: each ``run.remote()`` hands out the next scripted loop."""

    def __init__(self, loops: list[Loop]):
        self.sent = 0
        self.run = SimpleNamespace(remote=self._send)
        self._loops = iter(loops)

    def _send(self) -> Loop:
        self.sent += 1
        return next(self._loops)


def driver(worker_1: Worker, drains: list[list[int]]) -> RayRun:
    """A RayRun with only what ``poll`` reads. Worker 0 runs throughout; worker 1's loops are scripted.
    Each poll drains the next updates per worker from the server."""
    drv = object.__new__(RayRun)
    drv.config = SimpleNamespace(max_restarts=3, hang_timeout=600.0)
    drv.workers = [Worker([]), worker_1]
    drv.loops = {0: Loop(), 1: worker_1.run.remote()}
    drv.loop_started = [time.monotonic()] * WORKERS
    drv.hung, drv.worker_restarts = {}, [0] * WORKERS
    drv.updates_at_send = np.zeros(WORKERS, np.int64)
    answers = iter(drains)

    def drain(method: str):
        updates = next(answers)
        return [], np.array([[10 * u for u in updates], updates, [0] * WORKERS], np.int64), np.zeros(WORKERS)

    drv._ask_server = drain
    drv._mirror_counters = lambda slots: None
    drv._kill_hung_workers = lambda ages: None
    drv.rechecks = Rechecks(Cluster.CALLER)  # the cluster rules: tests/backends/test_ray_cluster.py
    drv.eval_loop = SimpleNamespace(take=lambda: [], restarts=0)
    return drv


@pytest.fixture(autouse=True)
def ray_waits(monkeypatch):
    """Ray's waits on the stand-in loops: a failed loop is done, and getting it raises its error."""

    def wait(refs, num_returns=1, timeout=None):
        done = [ref for ref in refs if ref.error is not None]
        return done, [ref for ref in refs if ref.error is None]

    def get(ref, timeout=None):
        raise ref.error

    monkeypatch.setattr(driver_module.ray, "wait", wait)
    monkeypatch.setattr(driver_module.ray, "get", get)


def unavailable(why: str) -> ActorUnavailableError:
    return ActorUnavailableError(why, None)


def test_a_loop_sent_while_ray_restarts_the_actor_is_sent_again_not_counted(capsys):
    """A worker's node dies: its loop fails as unavailable after it trained (a crash: counted). Ray restarts
    the actor elsewhere, and loops sent meanwhile fail as unavailable too, even after the new incarnation
    registered with the server (the driver's Ray client still holds the dead address): none of them ran,
    so they are sent again, not counted (counting them spent the restart budget on one loss)."""
    worker_1 = Worker([
        Loop(unavailable("the actor's node died")),  # it had trained: 40 updates
        Loop(unavailable("restarting")),  # sent before the new incarnation registered
        Loop(unavailable("restarting")),  # sent after it registered, before the driver's client knew
        Loop(unavailable("restarting")),
        Loop(),  # runs
    ])  # fmt: skip
    drv = driver(worker_1, [[50, 40], [60, 40], [70, 40], [80, 40]])
    for _ in range(4):
        assert drv.poll(0.0) == []
    assert worker_1.sent == 5 and drv.loops[1].error is None
    assert drv.worker_restarts == [0, 1]
    assert capsys.readouterr().err.count("warning: worker 1 crashed (ActorUnavailableError)") == 1


def test_a_loop_that_trained_and_becomes_unavailable_counts_each_time(capsys):
    worker_1 = Worker([Loop(unavailable("node died")), Loop(unavailable("node died again")), Loop()])
    drv = driver(worker_1, [[50, 40], [60, 45]])
    drv.poll(0.0)
    drv.poll(0.0)
    assert drv.worker_restarts == [0, 2] and worker_1.sent == 3
    err = capsys.readouterr().err
    assert "restarting its loop (1/3)" in err and "restarting its loop (2/3)" in err


def test_a_first_loop_that_fails_before_its_first_push_counts(capsys):
    """Only a loop sent after a crash may be still waiting for Ray's restart: a worker that dies before it
    pushed once (out of memory at its first update, say) is a crash, reported and counted."""
    worker_1 = Worker([Loop(unavailable("died at its first update")), Loop()])
    drv = driver(worker_1, [[50, 0]])
    drv.poll(0.0)
    assert drv.worker_restarts == [0, 1]
    err = capsys.readouterr().err
    assert "warning: worker 1 crashed (ActorUnavailableError); restarting its loop (1/3)" in err


def test_past_its_start_up_time_an_unavailable_loop_counts_even_if_it_never_ran():
    worker_1 = Worker([Loop(unavailable("never came up")), Loop()])
    drv = driver(worker_1, [[50, 0]])
    drv.worker_restarts[1] = 1  # its loop was sent after a crash, more than the start-up time ago
    drv.loop_started[1] -= driver_module.STARTUP_TIMEOUT_S + 1
    drv.poll(0.0)
    assert drv.worker_restarts == [0, 2]


def test_a_worker_killed_as_hung_counts_even_before_its_first_push():
    worker_1 = Worker([Loop(unavailable("killed")), Loop()])
    drv = driver(worker_1, [[50, 0]])
    drv.worker_restarts[1] = 1
    drv.hung[1] = "sent nothing to the parameter server for 9 s (hung) and was killed"
    drv.poll(0.0)
    assert drv.worker_restarts == [0, 2] and 1 not in drv.hung
