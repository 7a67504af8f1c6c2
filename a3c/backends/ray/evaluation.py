"""The driver's evaluator on Ray: the local Evaluator (eval.csv, best.pt on the driver's disk) playing its
episodes in the evaluation actor, with that actor's heartbeat, cancellation and restarts."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import ActorUnavailableError, RayActorError

from a3c.backends.ray.actor_calls import ActorFailed, wait_limit, writable_tensor
from a3c.runtime.evaluator import Evaluator
from a3c.runtime.supervisor import STARTUP_TIMEOUT_S

BEAT_S = 1.0  # how often the driver asks the evaluator actor whether its episodes still advance


CANCEL_GRACE_S = 5.0  # a cancelled evaluation gets this long to hand back its partial episodes


class _Hung(Exception):
    """The evaluator actor was silent past its timeout and has been killed."""


class RemoteEvaluator(Evaluator):
    """The driver's evaluator: eval.csv and best.pt here; the global weights from ``snapshot()`` (weights,
    global step, updates, statistics slots); the episodes played by the ``EvalActor``."""

    def __init__(self, *args: Any, snapshot: Callable[[], Any], actor: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.snapshot, self.actor = snapshot, actor
        self.remote_cpu_s = 0.0
        self.actor_restarts = 0
        self.actor_answered = False  # since its last (re)start: until then the start-up timeout applies
        self.restarted_at = time.monotonic()
        self.play_id = 0

    def _pull(self) -> tuple[int, int]:
        weights, global_step, updates, stats = self.snapshot()
        with torch.no_grad():
            self.flat.copy_(writable_tensor(weights))
        if self.obs_stats is not None:  # a private twin here (``EvalLoop``), loaded from the run's slots
            self.obs_stats.load_slot_arrays(stats["obs"])
            self.obs_snapshot.copy_from(self.obs_stats.merged())
        return global_step, updates

    def _play(self, episodes: int, seed: int, should_stop) -> tuple[np.ndarray, np.ndarray]:
        """Play on the actor, its envs reset on ``seed``; a hung or dead actor is killed and restarted (by
        Ray) and asked again, within ``max_restarts``; past that ``ActorFailed``. When stopping, a play that
        does not end is abandoned."""
        while True:
            self.play_id += 1
            obs_norm = None if self.obs_snapshot is None else self.obs_snapshot.state_dict()
            # Whether the actor was up when this play was sent: one sent while Ray was still (re)starting it
            # may fail as unavailable even after the new actor's first beat has answered.
            was_up = self.actor_answered
            ref = self.actor.play.remote(self.flat.numpy(), episodes, seed, self.play_id, obs_norm)
            try:
                result = self._await(ref, should_stop)
            except _Hung as exc:
                problem = str(exc)
            except ActorUnavailableError as exc:
                if was_up:  # it was up: this is a crash
                    problem = f"died ({type(exc).__name__})"
                elif should_stop():
                    return np.zeros(episodes), np.zeros(episodes, np.int64)
                elif time.monotonic() - self.restarted_at < STARTUP_TIMEOUT_S:
                    time.sleep(
                        BEAT_S
                    )  # Ray is still (re)starting it: ask again at this pace, under a deadline
                    continue
                else:
                    problem = f"did not come back within {STARTUP_TIMEOUT_S:g} s of its restart"
            except RayActorError as exc:
                problem = f"died ({type(exc).__name__})"
            else:
                if result is None:  # stopping, and the actor did not hand back its partial episodes
                    return np.zeros(episodes), np.zeros(episodes, np.int64)
                returns, lengths, cpu = result
                self.remote_cpu_s += cpu
                return returns, lengths
            budget = self.config.max_restarts
            if self.actor_restarts >= budget:  # actor_restarts counts the ones made, as the local backend's
                raise ActorFailed(
                    "evaluator actor", f"the evaluator actor {problem}; past its restart budget"
                )
            self.actor_restarts += 1
            self.actor_answered = False
            self.restarted_at = time.monotonic()
            print(
                f"warning: the evaluator actor {problem}; restarting it ({self.actor_restarts}/{budget})",
                file=sys.stderr,
                flush=True,
            )

    def _await(self, ref: Any, should_stop) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The result of the play ``ref``, asking the actor for its beat every ``BEAT_S``; kills it (raising
        ``_Hung``) once it is silent for longer than its timeout; None if stopping cut the wait short."""
        alive_at = time.monotonic()  # the last sign that its episodes advanced
        beat, beat_sent, cancelled_at = None, 0.0, None
        while True:
            limit = wait_limit(self.config.hang_timeout, starting=not self.actor_answered)
            done, _ = ray.wait([ref], timeout=BEAT_S)
            now = time.monotonic()
            if done:
                result = ray.get(ref, timeout=limit)  # ready: no wait
                self.actor_answered = True
                return result
            if should_stop():
                if cancelled_at is None:
                    self.actor.cancel.remote(self.play_id)
                    cancelled_at = now
                elif now - cancelled_at > CANCEL_GRACE_S:
                    return None
                continue
            if beat is not None and ray.wait([beat], timeout=0)[0]:
                age = ray.get(beat, timeout=limit)  # ready: no wait
                self.actor_answered = True
                alive_at = max(alive_at, beat_sent - (age or 0.0))
                beat = None
            if beat is None:
                beat, beat_sent = self.actor.beat.remote(), now
            if now - alive_at > limit:
                ray.kill(self.actor, no_restart=False)  # Ray starts a new one (max_restarts)
                raise _Hung(f"hung (its episodes made no progress for {now - alive_at:.0f} s) and was killed")

    def _cpu_s(self) -> float:
        return self.remote_cpu_s
