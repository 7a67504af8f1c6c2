"""A Learner's update reaches the shared model: the gradient is handed to the optimizer's own tensor."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from a3c.algo.learner import Learner, build_shared
from a3c.algo.normalize import SharedObsStats
from a3c.core.config import Config
from a3c.core.spaces import Spaces


def learner(numpy_grad: bool = True, **overrides) -> Learner:
    config = Config(env_id="CartPole-v1", envs_per_worker=2, t_max=5, numpy_grad=numpy_grad, **overrides)
    torch.manual_seed(0)
    model, optimizer = build_shared(config.validate(), Spaces((4,), 2))
    return Learner(config, model, optimizer, seed=3)


def test_first_update_is_an_adam_step_of_the_local_gradient():
    # Adam's first step is lr · g / (|g| + eps'), i.e. −lr · sign(g) wherever |g| ≫ eps.
    lrn = learner(lr=1e-3, max_grad_norm=0.0)
    before = lrn.shared_flat.clone()
    result = lrn.update()
    assert result.grad_norm > 0
    moved = lrn.shared_flat - before
    big = lrn.local_grad.abs() > 1e-5
    assert big.sum() > 100
    torch.testing.assert_close(moved[big], -1e-3 * lrn.local_grad[big].sign(), rtol=1e-3, atol=1e-7)
    # The shared model's own parameters (views of the same memory) moved too.
    assert not torch.equal(next(lrn.shared_model.parameters()).detach().reshape(-1), before[:256])


def test_shared_weights_keep_moving_and_the_local_copy_follows():
    lrn = learner()
    snapshots = [lrn.shared_flat.clone()]
    for _ in range(3):
        lrn.update()
        snapshots.append(lrn.shared_flat.clone())
    for a, b in zip(snapshots, snapshots[1:], strict=False):
        assert not torch.equal(a, b)
    lrn.update()
    # The local copy holds the weights pulled before the last update, i.e. the previous snapshot's step.
    torch.testing.assert_close(lrn.local_flat, snapshots[-1], rtol=0, atol=0)


def test_numpy_and_autograd_gradients_make_the_same_update():
    a, b = learner(numpy_grad=True), learner(numpy_grad=False)
    for _ in range(3):
        ra, rb = a.update(), b.update()
        assert ra.grad_norm == pytest.approx(rb.grad_norm, rel=1e-4)
        assert ra.policy_loss == pytest.approx(rb.policy_loss, rel=1e-4, abs=1e-6)
    torch.testing.assert_close(a.shared_flat, b.shared_flat, rtol=1e-4, atol=1e-6)


def test_optimizer_over_other_memory_is_refused():
    config = Config(env_id="CartPole-v1").validate()
    model, _ = build_shared(config, Spaces((4,), 2))
    _, other = build_shared(config, Spaces((4,), 2))
    with pytest.raises(ValueError, match="flat buffer"):
        Learner(config, model, other, seed=0)


def pendulum_learner(**overrides) -> tuple[Learner, SharedObsStats]:
    from a3c_envs import inspect_env

    config = Config(env_id="Pendulum-v1", envs_per_worker=3, t_max=4, obs_norm=True, **overrides).validate()
    spaces = inspect_env("Pendulum-v1").spaces
    torch.manual_seed(0)
    model, optimizer = build_shared(config, spaces)
    stats = SharedObsStats(spaces.obs_shape, writers=1)
    return Learner(config, model, optimizer, seed=1, normalizer=stats.writer(0)), stats


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_gaussian_learner_updates_mean_and_log_std_and_feeds_the_shared_obs_stats(squash):
    lrn, stats = pendulum_learner(squash=squash, reward_scale=True)
    log_std = lrn.shared_model.log_std.detach().clone()
    first = lrn.update()
    seg = lrn.collector.segment
    assert seg.actions.shape == (4, 3, 1) and seg.actions.dtype.name == "float32"
    assert torch.isfinite(torch.tensor(first.grad_norm))
    if squash == "clip":  # N(μ, 1): the Gaussian's entropy, 1.419 nats
        assert first.entropy == pytest.approx(1.419, abs=0.01)
    else:  # the squashed action's: below the Gaussian's + log((high - low)/2), since log(1 - tanh²) < 0
        assert 0.0 < first.entropy < 1.419 + np.log(2.0)
    assert not torch.equal(lrn.shared_model.log_std.detach(), log_std)
    lrn.update()  # its collection merged the first segment's raw observations into the shared stats
    assert float(stats.merged().count) >= 3 * 4
    assert abs(seg.obs).max() <= 10.0  # normalised and clipped


def test_learner_feeds_its_policy_observations_standardised_by_the_shared_stats():
    # Raw observations sit near 1000, -500 and 50 with scales 1, 20 and 0.1 (tests/support/envs.py): neither
    # the raw values nor values normalised with the prior statistics (clipped at ±10) pass these checks.
    import tests.support.envs  # noqa: F401 - registers OffsetObs-v0

    env_id = "tests.support.envs:OffsetObs-v0"
    config = Config(env_id=env_id, envs_per_worker=4, t_max=25, obs_norm=True).validate()
    torch.manual_seed(0)
    model, optimizer = build_shared(config, Spaces((3,), 2))
    stats = SharedObsStats((3,), writers=1)
    lrn = Learner(config, model, optimizer, seed=1, normalizer=stats.writer(0))
    try:
        lrn.update()  # the first segment is normalised with the prior only; its flush fills the stats
        lrn.update()
        obs = lrn.collector.segment.obs.reshape(-1, 3)  # the second segment, as the policy saw it
    finally:
        lrn.close()
    # Loose bounds (the stats come from one segment of 100 observations); the failures are ~10 or ~1000 off.
    np.testing.assert_allclose(obs.mean(axis=0), 0.0, atol=0.6)
    np.testing.assert_allclose(obs.std(axis=0), 1.0, atol=0.5)
    assert np.abs(obs).max() < 6.0  # standardised, not stuck at the clip


@pytest.mark.parametrize("numpy_grad", [True, False])
def test_a_grad_detached_from_the_flat_buffer_fails_the_update_loudly(numpy_grad):
    # zero_grad() sets every .grad to None (torch 2.x): autograd would then fill fresh tensors while the
    # flat buffer handed to the shared optimizer stayed zero, a silent momentum-only step every update.
    config = Config(env_id="CartPole-v1", envs_per_worker=2, t_max=5, numpy_grad=numpy_grad).validate()
    model, optimizer = build_shared(config, Spaces((4,), 2))
    lrn = Learner(config, model, optimizer, seed=0)
    try:
        lrn.update()
        lrn.local_model.zero_grad()
        before = lrn.shared_flat.detach().clone()
        with pytest.raises(RuntimeError, match="flat gradient buffer"):
            lrn.update()
        assert torch.equal(lrn.shared_flat.detach(), before)  # failed before any step
    finally:
        lrn.close()


def test_the_mean_pull_joins_the_loss_of_a_tanh_gaussian_only():
    from a3c.algo.loss import segment_loss

    for squash, pulled in (("tanh", True), ("clip", False)):
        lrn, _ = pendulum_learner(squash=squash, mean_l2_coef=0.5)
        lrn.update()
        seg, model = lrn.collector.segment, lrn.local_model
        with torch.no_grad():
            model.policy_head.bias.fill_(3.0)  # μ ≈ 3 for every state: saturated
        args = (model, seg, 0.99, 0.95, 0.5, 0.0)
        with_pull = segment_loss(*args, lrn.dist).total
        without = segment_loss(*args, dataclasses.replace(lrn.dist, mean_l2_coef=0.0)).total
        if pulled:  # 0.5 · mean μ² over the segment's samples
            with torch.no_grad():
                mean = model(torch.from_numpy(seg.obs.reshape(-1, 3)))[0][:, 0]
            assert float(with_pull - without) == pytest.approx(0.5 * float(mean.pow(2).mean()), rel=1e-5)
        else:
            assert float(with_pull) == float(without)
