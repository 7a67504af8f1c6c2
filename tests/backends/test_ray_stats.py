"""The Ray backend's statistics protocol without Ray: node groups' statistics and the driver's ``RunStats``
exchange slots as a drain and its reply do, and end with the statistics one process would have over all the
data."""

from __future__ import annotations

import numpy as np

from a3c.algo.normalize import RunningMeanStd
from a3c.backends.ray.stats import RunStats


def test_groups_exchanging_slots_agree_with_one_process_over_all_data():
    rng = np.random.default_rng(0)
    resumed = RunningMeanStd((3,), epsilon=0.0)
    first = rng.normal(5.0, 2.0, (50, 3))
    resumed.update(first)  # what a resumed checkpoint brought: slot 0
    driver = RunStats.empty((3,), 2, obs_norm=True, reward_scale=True)
    driver.obs.load_state_dict(resumed.state_dict())
    groups = []  # one worker each
    for worker in range(2):
        group = RunStats.empty((3,), 2, obs_norm=True, reward_scale=True)
        group.load(driver.arrays())
        groups.append((group, group.obs.writer(worker), group.reward.writer(worker)))
    everything = [first]
    returns = []
    for round_ in range(4):
        for worker, (group, obs, ret) in enumerate(groups):
            batch = rng.normal(round_, 1.0 + worker, (8, 3))
            everything.append(batch)
            obs.observe(batch)
            returns.append(batch[:, 0])
            ret.observe(batch[:, 0])
            obs.flush()  # a segment's end: the worker's own slot, in its group's statistics
            ret.flush()
            driver.load_own(worker, group.own(worker))  # the drain
            group.load(driver.arrays(), keep=worker)  # the next drain: every other slot
    groups[0][0].load(driver.arrays(), keep=0)  # group 0's next drain: group 1's last slots
    exact = RunningMeanStd((3,), epsilon=0.0)
    exact.update(np.concatenate(everything))
    for stats in (driver, groups[0][0], groups[1][0]):
        merged = stats.obs.state_dict()
        np.testing.assert_allclose(merged["mean"], exact.mean, rtol=1e-3)  # the merge's small prior aside
        np.testing.assert_allclose(merged["var"], exact.var, rtol=1e-3)
    assert float(driver.reward.state_dict()["count"]) >= len(np.concatenate(returns))


def test_a_group_keeps_its_own_newest_slot_and_takes_the_others():
    a = RunStats.empty((2,), 3, obs_norm=True, reward_scale=False)
    b = RunStats.empty((2,), 3, obs_norm=True, reward_scale=False)
    for i in range(3):
        a.obs.slots[i + 1].update(np.full((4, 2), float(i)))
        b.obs.slots[i + 1].update(np.full((2, 2), 10.0 + i))
    a.load(b.arrays(), keep=1)
    assert [float(s._count) for s in a.obs.slots] == [0.0, 2.0, 4.0, 2.0]
    assert float(a.obs.slots[2]._mean[0]) == 1.0 and float(a.obs.slots[3]._mean[0]) == 12.0
    assert a.reward is None and a.arrays().keys() == {"obs"}
