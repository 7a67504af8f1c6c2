"""A node's syncer: a thread that makes one exchange with every shard of the global model every
``interval`` seconds (a3c/backends/ray/exchange.py for the arithmetic), one exchange in flight at a time.
The node group runs one over its shared weights; the shard-load bench runs it in fake nodes without envs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from a3c.backends.ray.actor_calls import wait_limit
from a3c.backends.ray.exchange import NodeExchange
from a3c.backends.ray.shard import ShardFailed, collect_each


class Syncer:
    """Node ``index``'s exchanges of ``flat`` [params] with ``shards`` (slices ``bounds``), every
    ``interval`` s once started, as the node's group incarnation ``generation`` (0 unless set before the
    start). A shard that does not answer within ``timeout`` s, or dies, is ``down`` (shard: why) and left
    out of the exchanges, its slice's change kept, until the driver hands over its rebuilt successor
    (``adopt``): the workers train on meanwhile. A shard's refusal (the driver replaced this incarnation),
    or an error of the syncer itself, ends the loop: ``failure`` is (-1, why) and ``on_failure`` is
    called."""

    def __init__(
        self, index: int, flat: torch.Tensor, shards: list[Any], bounds: list[tuple[int, int]],
        interval: float, timeout: float, on_failure: Callable[[], None] = lambda: None,
    ):  # fmt: skip
        self.index, self.shards, self.bounds, self.generation = index, list(shards), bounds, 0
        self.interval, self.timeout, self.on_failure = interval, timeout, on_failure
        self.exchange = NodeExchange(flat, flat.detach().numpy())
        self.exchanges = 0
        self.lags: list[int] = []  # since the last ``take``: other nodes' exchanges between two of ours
        self.round_trips: list[float] = []  # since the last ``take``: ms per exchange
        self.failure: tuple[int, str] | None = None
        self.down: dict[int, str] = {}  # shards that failed an exchange, until their successor is adopted
        self.epochs = [0] * len(shards)  # successors adopted, per shard: which one a ``down`` is about
        self.answered = [False] * len(shards)  # until a shard's first answer, the start-up allowance applies
        self.lock = threading.Lock()  # one exchange at a time (the loop's, or the final one)
        self.stats_lock = threading.Lock()  # the counts and lists ``take`` hands over
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="a3c-node-syncer", daemon=True)

    def start(self) -> None:
        """Start the loop."""
        self.thread.start()

    def _loop(self) -> None:
        due = time.monotonic() + self.interval
        try:
            while not self.stop_event.wait(max(due - time.monotonic(), 0.0)):
                due = max(due + self.interval, time.monotonic())  # a late one does not bunch the next ones
                if not self.exchange_once():
                    return
        except Exception as exc:  # noqa: BLE001 - a syncer that ends must say why, or the node trains alone
            self.failure = (-1, f"the syncer failed: {type(exc).__name__}: {exc}")
            self.on_failure()

    def exchange_once(self) -> bool:
        """One exchange with every shard that is up, in parallel; False once this incarnation is refused
        (now or before)."""
        with self.lock:
            if self.failure is not None:
                return False
            sent, delta = self.exchange.take()
            started = time.monotonic()
            up = [k for k in range(len(self.shards)) if k not in self.down]
            if not up:
                return True  # every shard is being rebuilt: the change waits for them
            refs = [self.shards[k].exchange.remote(self.index, delta[slice(*self.bounds[k])], self.generation)
                    for k in up]  # fmt: skip
            limit = wait_limit(self.timeout, starting=not all(self.answered[k] for k in up))
            replies = collect_each(refs, limit)
            if any(reply is None for reply in replies):  # refused: a newer incarnation exchanges now
                why = f"incarnation {self.generation} of node group {self.index} was replaced; it stops"
                self.failure = (-1, why)
                self.on_failure()
                return False
            lags = []
            for k, reply in zip(up, replies, strict=True):
                if isinstance(reply, ShardFailed):
                    self.down[k] = reply.why  # its slice keeps its base: the change goes to its successor
                    continue
                self.answered[k] = True
                self.exchange.rebase(sent, np.asarray(reply[0]), start=self.bounds[k][0])
                lags.append(reply[1])
            if lags:
                with self.stats_lock:
                    self.exchanges += 1
                    self.lags.append(lags[0])
                    self.round_trips.append(1000 * (time.monotonic() - started))
            return True

    def adopt(self, shard: int, handle: Any, epoch: int) -> None:
        """Exchange with ``handle``, the driver's rebuilt shard ``shard`` (its ``epoch``-th), from the next
        exchange on; the change its predecessor missed goes to it then."""
        with self.lock:
            if epoch > self.epochs[shard]:
                self.shards[shard], self.epochs[shard] = handle, epoch
                self.answered[shard] = False
                self.down.pop(shard, None)

    def take(self) -> tuple[int, list[int], list[float]]:
        """(exchanges so far, the global lags and round trips since the last take)."""
        with self.stats_lock:
            lags, self.lags = self.lags, []
            round_trips, self.round_trips = self.round_trips, []
            return self.exchanges, lags, round_trips

    def stop(self) -> None:
        """End the loop, then make one last exchange (what was learned since the last one is not lost)."""
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=self.timeout)
        self.exchange_once()
