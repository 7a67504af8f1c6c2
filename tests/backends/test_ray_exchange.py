"""The Ray node mode's exchange arithmetic (a3c/backends/ray/exchange.py) and the shard's bookkeeping
(a3c/backends/ray/shard.py, its class run in this process): no cluster, exact values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.backends.ray.exchange import NodeExchange, combine_scale, shard_bounds
from a3c.core.config import Config

__import__("tests.support.extras", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI


def shard(index: int, weights: np.ndarray, nodes: int, scale: float):
    """A ``ParamShard`` as a plain object (its actor class's body), for exact checks without Ray."""
    from a3c.backends.ray.shard import ParamShard

    return ParamShard.__ray_metadata__.modified_class(index, weights, nodes, scale)


@pytest.mark.parametrize("size, shards", [(10, 1), (10, 3), (9155, 4), (5, 8), (1, 1)])
def test_shards_cover_the_vector_contiguously_in_near_equal_slices(size, shards):
    bounds = shard_bounds(size, shards)
    assert len(bounds) == min(shards, size)
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    lengths = [b - a for a, b in bounds]
    assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 1


def exchange(node: NodeExchange, shards: list, bounds: list, index: int) -> np.ndarray:
    """One exchange of ``node`` (index ``index``) with ``shards``, as the syncer makes it; returns the
    global weights."""
    sent, delta = node.take()
    replies = [s.exchange(index, delta[a:b]) for s, (a, b) in zip(shards, bounds, strict=True)]
    global_weights = np.concatenate([w for w, _ in replies])
    node.rebase(sent, global_weights)
    return global_weights


def test_one_node_summed_moves_the_global_model_exactly_as_the_node():
    start = np.arange(7, dtype=np.float32)
    flat = torch.from_numpy(start.copy())
    bounds = shard_bounds(7, 3)
    shards = [shard(k, start[a:b], 1, combine_scale("sum", 1)) for k, (a, b) in enumerate(bounds)]
    node = NodeExchange(flat, start)
    for step in range(3):
        flat += 0.5 * (step + 1)  # the workers' updates
        before = flat.clone()
        assert np.array_equal(exchange(node, shards, bounds, 0), before.numpy())
        assert torch.equal(flat, before)  # the node itself is unchanged
    assert [int(s.exchanges[0]) for s in shards] == [3, 3, 3]


def test_a_rebase_keeps_what_the_workers_wrote_during_the_exchange():
    flat = torch.zeros(4)
    node = NodeExchange(flat, np.zeros(4, np.float32))
    flat += 1.0
    sent, delta = node.take()
    assert np.array_equal(delta, np.ones(4, np.float32))
    flat += 2.0  # written while the exchange was in flight
    node.rebase(sent, np.full(4, 10.0, np.float32))  # the global model moved on with other nodes' changes
    assert torch.equal(flat, torch.full((4,), 12.0))  # global + the in-flight progress
    assert np.array_equal(node.base, np.full(4, 10.0, np.float32))
    flat += 0.5
    assert np.array_equal(node.take()[1], np.full(4, 2.5, np.float32))  # the next delta counts that progress


@pytest.mark.parametrize("combine, expected", [("sum", 5.0), ("mean", 2.5)])
def test_two_nodes_changes_are_summed_or_averaged(combine, expected):
    shards = [shard(0, np.zeros(2, np.float32), 2, combine_scale(combine, 2))]
    bounds = [(0, 2)]
    flats = [torch.zeros(2), torch.zeros(2)]
    nodes = [NodeExchange(f, np.zeros(2, np.float32)) for f in flats]
    flats[0] += 2.0
    flats[1] += 3.0
    exchange(nodes[0], shards, bounds, 0)
    global_weights = exchange(nodes[1], shards, bounds, 1)
    assert np.allclose(global_weights, expected)
    assert torch.allclose(flats[1], torch.full((2,), expected))


def test_by_default_nodes_changes_add_up_as_more_workers_would():
    # Averaged, each node's Adam step was halved: a Pong run on two nodes learned nothing in 2M (docs/ray.md)
    assert combine_scale(Config(env_id="x").sync_combine, 2) == 1.0


def test_the_global_lag_counts_the_other_nodes_exchanges_since_a_nodes_last():
    s = shard(0, np.zeros(1, np.float32), 3, 1.0)
    delta = np.zeros(1, np.float32)
    assert s.exchange(0, delta)[1] == 0
    s.exchange(1, delta)
    s.exchange(2, delta)
    s.exchange(1, delta)
    assert s.exchange(0, delta)[1] == 3  # three exchanges of others since node 0's last
    assert s.exchange(0, delta)[1] == 0
    assert s.exchange(1, delta)[1] == 2
    assert s.exchanges.tolist() == [3, 3, 1]


def test_a_replaced_groups_exchanges_are_refused_and_its_syncer_stops_its_workers(monkeypatch):
    """Group 0's incarnation 0 was replaced by incarnation 1 but is still alive (the kill did not reach
    it): from the driver's ``retire`` on, the shard adds nothing it sends, and its syncer stops its
    workers; the new incarnation exchanges as usual."""
    import a3c.backends.ray.syncer as syncer_module
    from a3c.backends.ray.syncer import Syncer

    s = shard(0, np.zeros(2, np.float32), 1, 1.0)
    stand_in = type("Shard", (), {"exchange": type("Call", (), {"remote": staticmethod(s.exchange)})})
    monkeypatch.setattr(syncer_module, "collect_each", lambda replies, _timeout: replies)  # no Ray
    stopped = []
    old_flat, new_flat = torch.zeros(2), torch.zeros(2)
    old = Syncer(0, old_flat, [stand_in], [(0, 2)], 1.0, 1.0, on_failure=lambda: stopped.append(1))
    old_flat += 1.0
    assert old.exchange_once() and np.array_equal(s.read(), [1.0, 1.0])
    s.retire(0, 1)  # the driver replaced group 0
    new = Syncer(0, new_flat, [stand_in], [(0, 2)], 1.0, 1.0)
    new.generation = 1  # as its NodeGroup sets it
    old_flat += 5.0
    assert not old.exchange_once() and np.array_equal(s.read(), [1.0, 1.0])  # nothing of it added
    assert stopped == [1] and old.failure == (-1, "incarnation 0 of node group 0 was replaced; it stops")
    assert s.exchange(0, np.ones(2, np.float32), generation=0) is None  # however it asks
    new_flat += 2.0
    assert new.exchange_once() and np.array_equal(s.read(), [3.0, 3.0]) and s.exchanges.tolist() == [2]


class StandIn:
    """A shard actor's stand-in for a syncer: calls run at once on ``shard`` (a plain ParamShard), or,
    once ``dead``, answer as a dead actor does."""

    def __init__(self, plain):
        self.plain, self.dead = plain, False
        self.exchange = type("Call", (), {"remote": self._exchange})()

    def _exchange(self, *args):
        from a3c.backends.ray.shard import ShardFailed

        return ShardFailed(0, "died (ActorDiedError)") if self.dead else self.plain.exchange(*args)


def test_a_dead_shards_slice_keeps_its_change_for_the_rebuilt_one_and_the_other_slices_sync_on(monkeypatch):
    """Two shards; shard 1 dies: the node's workers train on, shard 0 keeps exchanging (no change of its
    slice is sent twice), and shard 1's slice keeps its change since its last exchange, which reaches the
    shard the driver rebuilt from that last exchange's slice, once adopted."""
    import a3c.backends.ray.syncer as syncer_module
    from a3c.backends.ray.shard import ShardFailed
    from a3c.backends.ray.syncer import Syncer

    def collect(replies, _timeout):  # Ray's answers as shard.collect sees them: the first failure raised
        failed = [r for r in replies if isinstance(r, ShardFailed)]
        if failed:
            raise failed[0]
        return replies

    monkeypatch.setattr(syncer_module, "collect_each", lambda replies, _timeout: replies, raising=False)
    monkeypatch.setattr(syncer_module, "collect", collect, raising=False)  # no Ray
    bounds = [(0, 2), (2, 4)]
    shards = [StandIn(shard(k, np.zeros(2, np.float32), 1, 1.0)) for k in range(2)]
    flat = torch.zeros(4)
    stopped = []
    syncer = Syncer(0, flat, shards, bounds, 1.0, 1.0, on_failure=lambda: stopped.append(1))
    flat += 1.0
    assert syncer.exchange_once()
    shards[1].dead = True
    flat += 2.0
    exchanged = syncer.exchange_once()
    assert not stopped, "a dead shard stopped the node's workers"
    assert exchanged and syncer.down == {1: "died (ActorDiedError)"}
    flat += 4.0
    assert syncer.exchange_once()  # shard 1 left out
    assert np.array_equal(shards[0].plain.read(), [7.0, 7.0])  # each change of slice 0 once
    assert np.array_equal(syncer.exchange.base[2:], [1.0, 1.0])  # slice 1 as its shard last answered
    rebuilt = StandIn(shard(1, syncer.exchange.base[2:].copy(), 1, 1.0))  # what the driver builds from it
    syncer.adopt(1, rebuilt, epoch=1)
    flat += 8.0
    assert syncer.exchange_once() and syncer.down == {}
    assert np.array_equal(rebuilt.plain.read(), [15.0, 15.0]) and np.array_equal(
        shards[0].plain.read(), [15.0, 15.0]
    )
    assert torch.equal(flat, torch.full((4,), 15.0)) and not stopped  # nothing the workers learned is lost
    syncer.adopt(1, shards[1], epoch=1)  # an adopt sent again for the same successor changes nothing
    assert syncer.shards[1] is rebuilt
