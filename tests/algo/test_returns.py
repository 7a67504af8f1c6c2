"""GAE(λ) and n-step returns against hand-computed numbers and an independent pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import a3c.algo.rollout
from a3c.algo.loss import segment_loss
from a3c.algo.rollout import Segment, gae
from tests.support.reference import n_step_returns, reference_gae


def t(values, dtype=np.float64):
    """A [T, 1] column array from a list of T numbers (B = 1)."""
    return np.asarray(values, dtype=dtype).reshape(-1, 1)


def mask(values):
    return np.asarray(values, dtype=bool).reshape(-1, 1)


def assert_close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-9)


# The shared hand example: T=3, B=1, gamma=0.9.
#   rewards r = [1, 2, 3], values V = [0.5, 1.0, 1.5], bootstrap V(s_3) = 2.0.
GAMMA = 0.9
REWARDS = [1.0, 2.0, 3.0]
VALUES = [0.5, 1.0, 1.5]
BOOTSTRAP = 2.0
NO = [False, False, False]


# -- hand-computed examples ----------------------------------------------------------------------------------


def test_no_episode_end_lambda_one_by_hand():
    # n-step: R2 = 3 + 0.9*2.0 = 4.8; R1 = 2 + 0.9*4.8 = 6.32; R0 = 1 + 0.9*6.32 = 6.688.
    # deltas: d2 = 3 + 0.9*2.0 - 1.5 = 3.3; d1 = 2 + 0.9*1.5 - 1.0 = 2.35; d0 = 1 + 0.9*1.0 - 0.5 = 1.4.
    # GAE(1): A2 = 3.3; A1 = 2.35 + 0.9*3.3 = 5.32; A0 = 1.4 + 0.9*5.32 = 6.188 (= R - V).
    next_values = t([1.0, 1.5, BOOTSTRAP])
    adv, ret = gae(t(REWARDS), t(VALUES), next_values, mask(NO), mask(NO), GAMMA, 1.0)
    assert_close(adv, t([6.188, 5.32, 3.3]))
    assert_close(ret, t([6.688, 6.32, 4.8]))

    nsr = n_step_returns(
        t(REWARDS),
        np.array([BOOTSTRAP]),
        mask(NO),
        mask(NO),
        np.zeros((3, 1)),
        GAMMA,
    )
    assert_close(nsr, t([6.688, 6.32, 4.8]))


def test_no_episode_end_lambda_half_by_hand():
    # Same deltas as above [1.4, 2.35, 3.3]; gamma*lambda = 0.45.
    # A2 = 3.3; A1 = 2.35 + 0.45*3.3 = 3.835; A0 = 1.4 + 0.45*3.835 = 3.12575.
    # returns = A + V = [3.62575, 4.835, 4.8].
    next_values = t([1.0, 1.5, BOOTSTRAP])
    adv, ret = gae(t(REWARDS), t(VALUES), next_values, mask(NO), mask(NO), GAMMA, 0.5)
    assert_close(adv, t([3.12575, 3.835, 3.3]))
    assert_close(ret, t([3.62575, 4.835, 4.8]))


def test_terminal_step_has_no_bootstrap_by_hand():
    # terminated at t=1. next_values[1] = 99 is V(reset observation): it must be ignored.
    # deltas: d2 = 3 + 0.9*2.0 - 1.5 = 3.3; d1 = 2 + 0 - 1.0 = 1.0; d0 = 1 + 0.9*1.0 - 0.5 = 1.4.
    # GAE(1): A2 = 3.3; A1 = 1.0 (no recursion across the end); A0 = 1.4 + 0.9*1.0 = 2.3.
    # returns: [2.8, 2.0, 4.8]; n-step: R2 = 4.8, R1 = 2 (terminal), R0 = 1 + 0.9*2 = 2.8.
    term = mask([False, True, False])
    next_values = t([1.0, 99.0, BOOTSTRAP])
    adv, ret = gae(t(REWARDS), t(VALUES), next_values, term, mask(NO), GAMMA, 1.0)
    assert_close(adv, t([2.3, 1.0, 3.3]))
    assert_close(ret, t([2.8, 2.0, 4.8]))

    nsr = n_step_returns(
        t(REWARDS),
        np.array([BOOTSTRAP]),
        term,
        mask(NO),
        np.zeros((3, 1)),
        GAMMA,
    )
    assert_close(nsr, t([2.8, 2.0, 4.8]))


def test_terminal_step_with_lambda_half_by_hand():
    # terminated at t=1; deltas [1.4, 1.0, 3.3]; gamma*lambda = 0.45.
    # A2 = 3.3; A1 = 1.0; A0 = 1.4 + 0.45*1.0 = 1.85.
    term = mask([False, True, False])
    adv, _ = gae(t(REWARDS), t(VALUES), t([1.0, 99.0, BOOTSTRAP]), term, mask(NO), GAMMA, 0.5)
    assert_close(adv, t([1.85, 1.0, 3.3]))


def test_truncated_step_bootstraps_from_final_observation_by_hand():
    # truncated at t=1, V(final observation) = 5.0; the next value in the buffer, V(s_2) = V(reset obs) = 1.5,
    # must NOT be used, and the recursion must not run from t=2 into t=1.
    # gae gets V(final obs) in next_values[1]:
    # deltas: d2 = 3.3; d1 = 2 + 0.9*5.0 - 1.0 = 5.5; d0 = 1 + 0.9*1.0 - 0.5 = 1.4.
    # GAE(1): A2 = 3.3; A1 = 5.5; A0 = 1.4 + 0.9*5.5 = 6.35. returns = [6.85, 6.5, 4.8].
    # n-step: R2 = 4.8; R1 = 2 + 0.9*5.0 = 6.5 (not 2 + 0.9*4.8 = 6.32); R0 = 1 + 0.9*6.5 = 6.85.
    trunc = mask([False, True, False])
    adv, ret = gae(t(REWARDS), t(VALUES), t([1.0, 5.0, BOOTSTRAP]), mask(NO), trunc, GAMMA, 1.0)
    assert_close(adv, t([6.35, 5.5, 3.3]))
    assert_close(ret, t([6.85, 6.5, 4.8]))

    final_values = t([float("nan"), 5.0, float("nan")])  # read only where truncated
    nsr = n_step_returns(t(REWARDS), np.array([BOOTSTRAP]), mask(NO), trunc, final_values, GAMMA)
    assert_close(nsr, t([6.85, 6.5, 4.8]))


def test_truncated_last_step_uses_final_value_not_bootstrap_by_hand():
    # truncated at the last step t=2 with V(final obs) = 4.0; bootstrap_value (V of reset obs) = 2.0 unused.
    # R2 = 3 + 0.9*4.0 = 6.6; R1 = 2 + 0.9*6.6 = 7.94; R0 = 1 + 0.9*7.94 = 8.146.
    trunc = mask([False, False, True])
    nsr = n_step_returns(t(REWARDS), np.array([BOOTSTRAP]), mask(NO), trunc, t([0.0, 0.0, 4.0]), GAMMA)
    assert_close(nsr, t([8.146, 7.94, 6.6]))


def test_two_envs_are_independent_by_hand():
    # B=2, T=2, gamma=0.5, lambda=1. env 0: no end; env 1: terminated at t=0.
    # env 0: r = [1, 1], V = [0, 0], next = [0, 4]: d = [1, 1 + 2 = 3]; A1 = 3, A0 = 1 + 0.5*3 = 2.5.
    # env 1: r = [2, 2], V = [1, 1], next = [7, 2]: d0 = 2 - 1 = 1 (terminal), d1 = 2 + 1 - 1 = 2; A = [1, 2].
    rewards = np.array([[1.0, 2.0], [1.0, 2.0]])
    values = np.array([[0.0, 1.0], [0.0, 1.0]])
    next_values = np.array([[0.0, 7.0], [4.0, 2.0]])
    term = np.array([[False, True], [False, False]])
    adv, _ = gae(rewards, values, next_values, term, np.zeros_like(term), 0.5, 1.0)
    assert_close(adv, np.array([[2.5, 1.0], [3.0, 2.0]]))


# -- properties on random inputs -----------------------------------------------------------------------------

SHAPES = [(1, 1), (5, 3), (20, 4), (64, 8)]
GAMMAS = [0.9, 0.99, 1.0]


def random_segment(shape, seed, p_end=0.2):
    """Consistent random inputs: next_values from values, bootstrap and final values, as segment_loss does."""
    g = np.random.default_rng(seed)
    steps, envs = shape
    rewards = g.standard_normal(shape)
    values = g.standard_normal(shape)
    bootstrap = g.standard_normal(envs)
    final_values = g.standard_normal(shape)
    terminated = g.random(shape) < p_end
    truncated = (g.random(shape) < p_end) & ~terminated  # never both at one step
    next_values = np.concatenate([values[1:], bootstrap[None]])
    next_values = np.where(truncated, final_values, next_values)
    return rewards, values, next_values, bootstrap, final_values, terminated, truncated


def test_random_segments_have_episode_ends():
    # Guard: the random masks below really contain both kinds of ends (otherwise the tests prove little).
    *_, terminated, truncated = random_segment((64, 8), seed=0)
    assert terminated.any() and truncated.any()
    assert not (terminated & truncated).any()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_lambda_zero_is_one_step_td_error(shape, gamma):
    rewards, values, next_values, _, _, terminated, truncated = random_segment(shape, seed=1)
    adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma, 0.0)
    td = rewards + gamma * np.where(terminated, 0.0, next_values) - values
    assert_close(adv, td)
    assert_close(ret, td + values)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_lambda_one_equals_n_step_returns(shape, gamma):
    rewards, values, next_values, bootstrap, final_values, terminated, truncated = random_segment(
        shape, seed=2
    )
    adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma, 1.0)
    expected = n_step_returns(rewards, bootstrap, terminated, truncated, final_values, gamma)
    assert_close(ret, expected)
    assert_close(adv, expected - values)


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_matches_python_loop_reference(gamma, lam):
    for seed, shape in enumerate(SHAPES):
        rewards, values, next_values, _, _, terminated, truncated = random_segment(shape, seed=10 + seed)
        adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma, lam)
        expected = reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam)
        assert_close(adv, expected)
        assert_close(ret, expected + values)


@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_recursion_does_not_cross_episode_boundary(lam):
    # Changing everything after an episode end (of either kind) must not change the advantages up to it.
    rewards, values, next_values, _, _, _, _ = random_segment((10, 2), seed=3)
    for kind in ("terminated", "truncated"):
        end = np.zeros((10, 2), bool)
        end[4] = True
        none = np.zeros_like(end)
        term, trunc = (end, none) if kind == "terminated" else (none, end)
        adv, _ = gae(rewards, values, next_values, term, trunc, 0.99, lam)
        changed_r, changed_v, changed_nv = rewards.copy(), values.copy(), next_values.copy()
        changed_r[5:] += 100.0
        changed_v[5:] -= 50.0
        changed_nv[5:] += 30.0
        adv2, _ = gae(changed_r, changed_v, changed_nv, term, trunc, 0.99, lam)
        assert_close(adv2[:5], adv[:5])
        assert not np.allclose(adv2[5:], adv[5:])  # the change does reach the steps after the end


def test_float32_inputs_keep_dtype_and_shape():
    rewards, values, next_values, bootstrap, final_values, terminated, truncated = random_segment(
        (7, 3), seed=4
    )
    f32 = [x.astype(np.float32) for x in (rewards, values, next_values, bootstrap, final_values)]
    adv, ret = gae(f32[0], f32[1], f32[2], terminated, truncated, 0.99, 0.95)
    assert adv.dtype == ret.dtype == np.float32 and adv.shape == ret.shape == (7, 3)
    nsr = n_step_returns(f32[0], f32[3], terminated, truncated, f32[4], 0.99)
    assert nsr.dtype == np.float32 and nsr.shape == (7, 3)


# -- segment_loss (through segment_targets) feeds gae the right next values ---------------------------------


class _ValueIsFirstCoordinate(torch.nn.Module):
    """A stand-in ActorCritic: uniform logits and V(s) = s[0], so every value in the batch is known."""

    def __init__(self, n_actions: int = 2):
        super().__init__()
        self.n_actions = n_actions
        self.bias = torch.nn.Parameter(torch.zeros(()))

    def forward(self, obs):
        values = obs[:, 0] + self.bias
        return torch.zeros(obs.shape[0], self.n_actions) + self.bias, values


def test_segment_loss_bootstraps_truncated_step_from_final_obs(monkeypatch):
    # T=3, B=2, obs_dim=2. V(s) = s[0]. env 1 is truncated at t=1 (final obs value 5.0, reset obs in the
    # buffer at t=2 has value 1.5); env 0 is terminated at t=0.
    seg = Segment.allocate(3, 2, 2)
    seg.obs[:, :, 0] = np.array([[0.1, 0.5], [0.2, 1.0], [0.3, 1.5]], np.float32)
    seg.rewards[:] = 1.0
    seg.terminated[0, 0] = True
    seg.truncated[1, 1] = True
    seg.final_obs[:, :, 0] = -7.0  # garbage where not truncated
    seg.final_obs[1, 1, 0] = 5.0
    seg.next_obs[:, 0] = np.array([0.4, 2.0], np.float32)

    captured = {}
    real_gae = a3c.algo.rollout.gae

    def spy(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
        captured.update(
            values=values.copy(),
            next_values=next_values.copy(),
            terminated=terminated.copy(),
            truncated=truncated.copy(),
        )
        return real_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda)

    monkeypatch.setattr(a3c.algo.rollout, "gae", spy)
    terms = segment_loss(
        _ValueIsFirstCoordinate(), seg, gamma=0.9, gae_lambda=1.0, value_coef=0.5, entropy_coef=0.0
    )

    np.testing.assert_allclose(captured["values"], [[0.1, 0.5], [0.2, 1.0], [0.3, 1.5]], rtol=1e-6)
    nv = captured["next_values"]
    assert nv[1, 1].item() == pytest.approx(5.0)  # V(final obs), not V(s_2) = 1.5 of the reset obs
    np.testing.assert_allclose(nv[:, 0], [0.2, 0.3, 0.4], rtol=1e-6)  # env 0: next obs, then next_obs
    assert nv[0, 1].item() == pytest.approx(1.0) and nv[2, 1].item() == pytest.approx(2.0)
    assert captured["terminated"][0, 0] and captured["truncated"][1, 1]

    # And the loss is built from those numbers. Hand: env 1: R2 = 1 + 0.9*2 = 2.8; R1 = 1 + 0.9*5 = 5.5;
    # R0 = 1 + 0.9*5.5 = 5.95. env 0: R2 = 1 + 0.9*0.4 = 1.36; R1 = 1 + 0.9*1.36 = 2.224; R0 = 1 (terminal).
    # value loss = mean((R - V)^2) over the 6 samples.
    returns = np.array([[1.0, 5.95], [2.224, 5.5], [1.36, 2.8]])
    values = np.array([[0.1, 0.5], [0.2, 1.0], [0.3, 1.5]])
    assert terms.value == pytest.approx(np.mean((returns - values) ** 2), rel=1e-5)
