"""Running mean/std equals numpy's over all data, however it is split, merged or shared across processes;
normalisation, checkpoint state, and the per-env reward scaler."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from a3c.algo.normalize import RewardScaler, RunningMeanStd, SharedObsStats
from a3c.runtime.context import child_context

LOC = np.array([1.0, -2.0, 50.0])
SCALE = np.array([0.5, 2.0, 3.0])


def batches(seed: int, n: int = 5) -> list[np.ndarray]:
    """``n`` deterministic batches [N_k, 3] of different sizes, off-centre and of different scales."""
    rng = np.random.default_rng(seed)
    return [rng.normal(LOC, SCALE, size=(int(rng.integers(1, 40)), 3)) for _ in range(n)]


def assert_stats(rms: RunningMeanStd, mean: np.ndarray, var: np.ndarray, count: float) -> None:
    np.testing.assert_allclose(rms.mean.numpy(), mean, rtol=1e-9, atol=0)
    np.testing.assert_allclose(rms.var.numpy(), var, rtol=1e-9, atol=0)
    np.testing.assert_allclose(float(rms.count), count, rtol=1e-12, atol=0)


# -- 1, 2: sequential updates and merges equal the moments of all the data -------------------------------


def test_update_equals_numpy_moments_of_the_concatenation():
    rms = RunningMeanStd((3,), epsilon=1e-12)  # a negligible prior, so the moments are the data's alone
    data = batches(seed=0, n=8)
    for batch in data:
        rms.update(batch)
    whole = np.concatenate(data)
    assert_stats(rms, whole.mean(axis=0), whole.var(axis=0), len(whole) + 1e-12)
    assert rms.mean.dtype == rms.var.dtype == rms.count.dtype == torch.float64


def test_update_rejects_a_batch_of_another_shape():
    with pytest.raises(ValueError, match="batch shape"):
        RunningMeanStd((3,)).update(np.zeros((4, 2)))


def test_merging_separate_stats_equals_one_reference_fed_everything():
    parts = [RunningMeanStd((3,), epsilon=0.0) for _ in range(3)]  # parts carry only real data
    reference, merged = RunningMeanStd((3,)), RunningMeanStd((3,))
    for seed, part in enumerate(parts):
        for batch in batches(seed=10 + seed):
            part.update(batch)
            reference.update(batch)
    for part in parts:
        merged.merge(part.mean.numpy(), part.var.numpy(), float(part.count))
    assert_stats(merged, reference.mean.numpy(), reference.var.numpy(), float(reference.count))


# -- 3: one copy of the stats, shared by spawned processes --------------------------------------------------

CHILD_FLUSHES = 3


def child_batches(seed: int) -> list[list[np.ndarray]]:
    """What child ``seed`` observes: per flush, a few batches."""
    data = batches(seed=100 + seed, n=2 * CHILD_FLUSHES)
    return [data[2 * k : 2 * k + 2] for k in range(CHILD_FLUSHES)]


def observe_in_child(stats: SharedObsStats, writer: int) -> None:
    """Process target (spawned; imported by module name): observe, normalise and flush into its slot."""
    torch.set_num_threads(1)
    assert all(slot.mean.is_shared() and slot.count.is_shared() for slot in stats.slots)
    normalizer = stats.writer(writer)
    for flush in child_batches(writer):
        for batch in flush:
            normalizer.observe(batch)
            assert normalizer(batch).dtype == np.float32
        normalizer.flush()


@pytest.mark.slow  # spawns processes
def test_shared_stats_merge_every_process_observations():
    ctx = child_context()  # the trainer's: a fork of the forkserver, torch already imported
    stats = SharedObsStats((3,), writers=2)
    children = [ctx.Process(target=observe_in_child, args=(stats, writer)) for writer in range(2)]
    try:
        for child in children:
            child.start()
        for child in children:
            child.join(timeout=60)
            assert child.exitcode == 0, f"child exited with {child.exitcode}"
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
                child.join(timeout=10)
    reference = RunningMeanStd((3,))
    for writer in range(2):
        for flush in child_batches(writer):
            for batch in flush:
                reference.update(batch)
    assert_stats(stats.merged(), reference.mean.numpy(), reference.var.numpy(), float(reference.count))


def test_flush_merges_only_observed_data_and_resets_the_accumulator():
    stats = SharedObsStats((3,), writers=1)
    normalizer = stats.writer(0)
    normalizer.flush()  # nothing observed: the shared stats are untouched
    assert float(stats.merged().count) == pytest.approx(1e-4, rel=0, abs=0)
    first, second = batches(seed=7, n=2)
    normalizer.observe(first)
    normalizer.flush()
    normalizer.observe(second)
    normalizer.flush()  # a stale accumulator would merge ``first`` twice
    reference = RunningMeanStd((3,))
    reference.update(first)
    reference.update(second)
    assert_stats(stats.merged(), reference.mean.numpy(), reference.var.numpy(), float(reference.count))
    np.testing.assert_array_equal(normalizer(second), reference.normalize(second))


def test_stats_resume_from_a_state_dict_into_slot_zero():
    stats = SharedObsStats((3,), writers=2)
    writer = stats.writer(1)
    writer.observe(batches(seed=3, n=1)[0])
    writer.flush()
    saved = stats.state_dict()
    resumed = SharedObsStats((3,), writers=1)  # a resume may have another worker count
    resumed.load_state_dict(saved)
    for key, value in resumed.state_dict().items():
        np.testing.assert_allclose(value.numpy(), saved[key].numpy(), rtol=2e-3)  # reload: +1 prior


# -- 4: normalize ----------------------------------------------------------------------------------------


def test_normalize_standardises_the_data_it_was_fitted_on_and_clips():
    rng = np.random.default_rng(3)
    data = rng.normal(LOC, SCALE, size=(5000, 3))
    rms = RunningMeanStd((3,))
    rms.update(data)
    out = rms.normalize(data, clip=100.0)
    assert out.dtype == np.float32 and out.shape == data.shape
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=0), 1.0, atol=1e-5)

    single = rms.normalize(LOC + 1000 * SCALE, clip=5.0)  # one observation [3], far out on every axis
    assert single.shape == (3,) and single.dtype == np.float32
    np.testing.assert_array_equal(single, np.float32(5.0))
    assert np.abs(rms.normalize(data, clip=2.0)).max() == np.float32(2.0)


# -- 5: checkpoint state -----------------------------------------------------------------------------------


def test_state_dict_roundtrip_into_shared_stats():
    source = RunningMeanStd((3,))
    for batch in batches(seed=4):
        source.update(batch)
    state = source.state_dict()
    target = RunningMeanStd((3,), shared=True)
    target.load_state_dict(state)
    for key in ("mean", "var", "count"):
        torch.testing.assert_close(getattr(target, key), getattr(source, key), rtol=0, atol=0)
        assert getattr(target, key).is_shared()  # loaded in place, not replaced
    np.testing.assert_array_equal(target.normalize(batch), source.normalize(batch))  # the views followed

    source.update(batch)  # the state dict holds clones: later updates leave it alone
    assert float(state["count"]) != float(source.count)

    copy = RunningMeanStd((3,))
    copy.copy_from(source)
    torch.testing.assert_close(copy.state_dict(), source.state_dict(), rtol=0, atol=0)


def test_load_state_dict_names_the_bad_key_and_changes_nothing():
    rms = RunningMeanStd((3,))
    before = rms.state_dict()
    bad_shape = {"mean": torch.zeros(3), "var": torch.ones(4), "count": torch.tensor(5.0)}
    with pytest.raises(ValueError, match=re.escape("'var'")):
        rms.load_state_dict(bad_shape)
    with pytest.raises(ValueError, match=re.escape("'count'")):
        rms.load_state_dict({"mean": torch.zeros(3), "var": torch.ones(3)})
    torch.testing.assert_close(rms.state_dict(), before, rtol=0, atol=0)  # mean was valid, yet not written


# -- 6: reward scaling -------------------------------------------------------------------------------------


def reward_scaler(num_envs: int, gamma: float, clip: float, writers: int = 1, index: int = 0):
    """A scaler on writer ``index`` of fresh return statistics shared by ``writers`` (and those stats)."""
    stats = SharedObsStats((), writers, shared=False)
    return RewardScaler(num_envs, gamma, stats.writer(index), clip=clip), stats


def test_reward_scaler_matches_a_hand_computed_reference_with_resets():
    gamma, prior = 0.5, 1e-4  # prior: the merged snapshot's epsilon count, mean 0, var 1
    dones = [[False, False], [True, False], [False, False], [False, True], [False, False]]
    # Returns of a constant reward 1 by hand: ret = 0.5 * ret + 1, zeroed after a done step.
    returns = [[1.0, 1.0], [1.5, 1.5], [1.0, 1.75], [1.5, 1.875], [1.75, 1.0]]
    scaler, _ = reward_scaler(num_envs=2, gamma=gamma, clip=1000.0)
    seen: list[float] = []
    for done, ret in zip(dones, returns, strict=True):
        scaled = scaler(np.ones(2), np.array(done))
        # A one-step segment: the scale is that of every return before this step (the prior at first).
        n = prior + len(seen)
        mean = sum(seen) / n
        var = (prior * 1.0 + sum(x * x for x in seen)) / n - mean**2
        assert scaled.dtype == np.float32 and scaled.shape == (2,)
        np.testing.assert_allclose(scaled, 1.0 / np.sqrt(var + 1e-8), rtol=1e-6)
        scaler.flush()
        seen += ret
    np.testing.assert_array_equal(scaler.ret, [1.75, 1.0])


def test_the_batches_of_a_segment_are_kept_as_they_were_seen():
    # Batches wait for the flush (one update per segment): an env or the reward scaler writing into its
    # array after the step must not change what the statistics saw.
    scaler, stats = reward_scaler(num_envs=1, gamma=0.5, clip=1000.0)
    for done in (False, True, False):
        scaler(np.ones(1), np.array([done]))  # returns 1, 1.5 (then reset), 1
    normalizer = SharedObsStats((2,), 1, shared=False).writer(0)
    buffer = np.array([[1.0, 2.0]])
    normalizer.observe(buffer)
    buffer[:] = [[3.0, 6.0]]  # reused in place, as a vector env may
    normalizer.observe(buffer)
    scaler.flush()
    normalizer.flush()
    np.testing.assert_allclose(stats.slots[1]._mean, 3.5 / 3)
    np.testing.assert_allclose(normalizer.slot._mean, [2.0, 4.0])


def test_reward_scale_is_fixed_within_a_segment_and_shared_by_the_workers_after_it():
    a, stats = reward_scaler(num_envs=2, gamma=0.9, clip=1000.0, writers=2, index=0)
    b = RewardScaler(2, 0.9, stats.writer(1), clip=1000.0)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a(rng.normal(size=2) * 5, np.zeros(2, bool))
    rewards = np.array([1.0, -2.0])
    still_the_prior = a(rewards, np.zeros(2, bool))
    np.testing.assert_array_equal(still_the_prior, rewards.astype(np.float32))
    a.flush()
    b.flush()  # b saw nothing itself, yet now scales by the returns worker a shared
    scale = 1.0 / np.sqrt(stats.merged().var.item() + 1e-8)
    assert stats.merged().count.item() > 8 and abs(scale - 1.0) > 0.1
    np.testing.assert_allclose(b(rewards, np.zeros(2, bool)), rewards * scale, rtol=1e-6)


def test_reward_statistics_round_trip_through_a_checkpoint_state():
    # What a resume needs: the saved merged statistics, loaded into a new run's slots, scale alike.
    a, stats = reward_scaler(num_envs=3, gamma=0.99, clip=1000.0)
    for _ in range(50):
        a(np.random.default_rng(1).normal(size=3) * 10, np.zeros(3, bool))
    a.flush()
    restored = SharedObsStats((), 4, shared=False)
    restored.load_state_dict(stats.state_dict())
    b = RewardScaler(3, 0.99, restored.writer(2), clip=1000.0)
    rewards = np.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(b(rewards, np.zeros(3, bool)), a(rewards, np.zeros(3, bool)), rtol=1e-6)


def test_reward_scaler_on_a_long_constant_stream_is_finite_and_clipped():
    clip = 5.0
    scaler, _ = reward_scaler(num_envs=3, gamma=0.5, clip=clip)
    # The return converges to 2, so its variance shrinks towards 0 and 1/std grows until clipping bites.
    out = []
    for _ in range(300):
        out.append(scaler(np.ones(3), np.zeros(3, dtype=bool)))
        scaler.flush()
    out = np.array(out)
    assert np.isfinite(out).all() and out.dtype == np.float32
    assert np.abs(out).max() <= clip
    assert (out[-1] == np.float32(clip)).all()


def test_shared_stats_cross_to_a_child_as_three_file_descriptors_whatever_the_workers():
    # Every worker start carries the observation and the reward statistics; Linux passes at most 253 file
    # descriptors per message, which one fd per tensor per slot passed at ~39 workers with both on.
    from multiprocessing import context
    from multiprocessing.reduction import ForkingPickler

    class CountingPopen:  # what the forkserver's Popen offers to picklers of shared tensors
        def __init__(self):
            self.fds = 0

        def duplicate_for_child(self, fd: int) -> int:
            self.fds += 1
            return fd

        def DupFd(self, fd: int):  # noqa: N802 - multiprocessing's name
            return fd

    for writers in (2, 64):
        stats = SharedObsStats((3,), writers)
        popen = CountingPopen()
        context.set_spawning_popen(popen)
        try:
            ForkingPickler.dumps(stats)
        finally:
            context.set_spawning_popen(None)
        assert popen.fds == 3, (writers, popen.fds)


def test_a_non_finite_reward_stays_out_of_the_running_return_and_the_statistics():
    scaler, stats = reward_scaler(2, 0.9, clip=1000.0)
    assert np.isposinf(scaler(np.array([0.0, np.inf]), np.array([False, False]))[1])  # not clipped to 10
    scaled = scaler(np.array([1.0, np.nan]), np.array([False, False]))
    assert np.isfinite(scaled[0]) and np.isnan(scaled[1])  # its segment's loss is not finite: skipped
    scaler(np.array([2.0, 3.0]), np.array([False, False]))
    scaler.flush()
    assert np.allclose(scaler.ret, [0.9 * (0.9 * 0.0 + 1.0) + 2.0, 3.0])  # env 1: as if no non-finite step
    merged = stats.merged()  # the four finite returns (0.0, 1.0, 2.9, 3.0) and the prior's tiny count
    assert np.isfinite(merged.mean.item()) and np.isfinite(merged.var.item())
    assert merged.count.item() == pytest.approx(4, abs=1e-3)
