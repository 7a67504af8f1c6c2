"""Action distributions against torch.distributions, and Box actions staying in bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Independent, Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform, TanhTransform

from a3c.algo.distributions import LOG_STD_MAX, LOG_STD_MIN, ActionDist, bound_log_std, raw_log_std


def gaussian_out(rng: np.random.Generator, n: int, dims: int) -> torch.Tensor:
    """[n, 2·dims] policy outputs: means and RAW log σ (see ``sigma``)."""
    mean = rng.normal(size=(n, dims))
    log_std = rng.uniform(-2.0, 1.0, size=(n, dims))
    return torch.tensor(np.concatenate([mean, log_std], axis=1), dtype=torch.float64)


def sigma(out: torch.Tensor, dims: int) -> torch.Tensor:
    """The σ of ``out``'s raw log σ columns."""
    return bound_log_std(out[:, dims:]).exp()


@pytest.mark.parametrize("dims", [1, 3, 6])
def test_gaussian_log_prob_and_entropy_match_torch_distributions(dims):
    rng = np.random.default_rng(dims)
    out = gaussian_out(rng, 64, dims)
    actions = torch.tensor(rng.normal(size=(64, dims)) * 2.0)
    dist = ActionDist(True, dims, (-1.0,) * dims, (1.0,) * dims, "clip")
    log_prob, entropy = dist.log_prob_entropy(out, actions)
    reference = Independent(Normal(out[:, :dims], sigma(out, dims)), 1)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())


def test_tanh_squashed_log_prob_matches_the_transformed_distribution():
    rng = np.random.default_rng(0)
    dims, low, high = 2, (-2.0, 0.0), (2.0, 1.0)
    out = gaussian_out(rng, 32, dims)
    u = torch.tensor(rng.normal(size=(32, dims)))
    dist = ActionDist(True, dims, low, high, "tanh")
    log_prob, _ = dist.log_prob_entropy(out, u)
    scale = (torch.tensor(high) - torch.tensor(low)) / 2
    loc = torch.tensor(low) + scale
    squashed = TransformedDistribution(
        Normal(out[:, :dims], sigma(out, dims)), [TanhTransform(), AffineTransform(loc, scale)]
    )
    action = torch.tensor(dist.env_action(u.numpy()), dtype=torch.float64)
    # The density of the action the env got (tanh saturates in float64 only far beyond these samples).
    torch.testing.assert_close(log_prob, squashed.log_prob(action).sum(-1), rtol=1e-6, atol=1e-6)


def squashed_entropy_mc(mean: float, log_std: float, half_range: float, n: int, seed: int) -> tuple:
    """Monte-Carlo entropy -E[log p(a)] of a = c + half_range·tanh(u), u ~ N(mean, σ), from torch's own
    TransformedDistribution (log-probs from u, so no atanh of a saturated action): (mean, std err)."""
    gen = torch.Generator().manual_seed(seed)
    u = mean + np.exp(log_std) * torch.randn(n, dtype=torch.float64, generator=gen)
    base = Normal(torch.tensor(mean, dtype=torch.float64), torch.tensor(np.exp(log_std)))
    affine = AffineTransform(0.0, half_range)
    tanh = TanhTransform()
    x = tanh(u)
    log_p = base.log_prob(u) - tanh.log_abs_det_jacobian(u, x) - affine.log_abs_det_jacobian(x, affine(x))
    return float(-log_p.mean()), float(log_p.std() / np.sqrt(n))


@pytest.mark.parametrize(
    "mean, log_std, half_range", [(0.0, 0.0, 1.0), (0.5, -1.0, 2.0), (1.5, 1.0, 0.5), (0.0, 1.5, 1.0)]
)
def test_tanh_squashed_entropy_is_the_squashed_actions_entropy(mean, log_std, half_range):
    # Our per-sample estimate, averaged over samples drawn from the policy, against an independent
    # Monte-Carlo estimate of the squashed distribution's entropy. The Gaussian's entropy alone misses by
    # E[log(1 - tanh²)] + log(half_range): 0.6 to 2.4 nats on these cases.
    dist = ActionDist(True, 1, (-half_range,), (half_range,), "tanh")
    n = 200_000
    out = torch.tensor([[mean, raw_log_std(log_std)]], dtype=torch.float64).expand(n, 2)
    gen = torch.Generator().manual_seed(1)
    u = mean + np.exp(log_std) * torch.randn(n, 1, dtype=torch.float64, generator=gen)
    _, entropy = dist.log_prob_entropy(out, u)
    expected, stderr = squashed_entropy_mc(mean, log_std, half_range, n, seed=2)
    assert abs(float(entropy.mean()) - expected) < 5 * (stderr + float(entropy.std()) / np.sqrt(n))


def test_tanh_squashed_entropy_bonus_stops_pushing_sigma_up():
    # With σ large the squashed action piles onto the bounds and its entropy FALLS as σ grows: the bonus's
    # gradient must say so (the Gaussian's entropy has d/dlogσ = +1 everywhere, which drove σ up forever).
    dist = ActionDist(True, 1, (-1.0,), (1.0,), "tanh")
    n = 100_000
    gen = torch.Generator().manual_seed(3)
    eps = torch.randn(n, 1, dtype=torch.float64, generator=gen)

    def entropy_slope(log_std: float) -> float:
        """d entropy / d log σ (the raw value's gradient over the bound's slope there)."""
        raw = torch.tensor(raw_log_std(log_std), dtype=torch.float64, requires_grad=True)
        out = torch.stack([torch.zeros((), dtype=torch.float64), raw]).expand(n, 2)
        u = (np.exp(log_std) * eps).detach()  # the stored samples of that policy
        _, entropy = dist.log_prob_entropy(out, u)
        entropy.mean().backward()
        (slope,) = torch.autograd.grad(bound_log_std(raw), raw)
        return float(raw.grad / slope)

    assert entropy_slope(1.5) < -0.3  # past the maximum: more σ, less entropy
    assert entropy_slope(-2.0) > 0.9  # a narrow policy: tanh ≈ linear, the Gaussian's +1 holds


def test_categorical_log_prob_and_entropy_match_torch_distributions():
    rng = np.random.default_rng(1)
    logits = torch.tensor(rng.normal(size=(50, 4)))
    actions = torch.tensor(rng.integers(4, size=50))
    log_prob, entropy = ActionDist(False, 4).log_prob_entropy(logits, actions)
    reference = Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_box_actions_stay_in_bounds(squash):
    rng = np.random.default_rng(2)
    low, high = (-2.0, -0.5, 0.0), (2.0, 0.5, 10.0)
    dist = ActionDist(True, 3, low, high, squash)
    out = np.concatenate([rng.normal(size=(1000, 3)) * 5, np.full((1000, 3), 1.5)], axis=1).astype(np.float32)
    u = dist.sample(out.copy(), dist.noise(rng, (1000,)))
    actions = dist.env_action(u)
    assert actions.dtype == np.float32 and actions.shape == (1000, 3)
    assert (actions >= np.array(low, np.float32)).all() and (actions <= np.array(high, np.float32)).all()
    greedy = dist.greedy(out)
    assert (greedy >= np.array(low, np.float32)).all() and (greedy <= np.array(high, np.float32)).all()


def test_numpy_gaussian_samples_have_the_policy_mean_and_std():
    rng = np.random.default_rng(3)
    dist = ActionDist(True, 2, (-5.0, -5.0), (5.0, 5.0))
    raw = [raw_log_std(np.log(0.3)), raw_log_std(np.log(2.0))]
    out = np.tile(np.array([[0.5, -1.0, *raw]], np.float32), (20000, 1))
    u = dist.sample(out, dist.noise(rng, (20000,)))
    np.testing.assert_allclose(u.mean(0), [0.5, -1.0], atol=0.05)
    np.testing.assert_allclose(u.std(0), [0.3, 2.0], rtol=0.03)


def test_gumbel_max_samples_follow_the_softmax():
    rng = np.random.default_rng(4)
    dist = ActionDist(False, 3)
    logits = np.tile(np.log(np.array([[0.2, 0.5, 0.3]], np.float32)), (30000, 1))
    actions = dist.sample(logits, dist.noise(rng, (30000,)))
    np.testing.assert_allclose(np.bincount(actions, minlength=3) / 30000, [0.2, 0.5, 0.3], atol=0.01)


def test_log_std_is_bounded_smoothly_and_keeps_a_gradient_past_its_bounds():
    raw = torch.tensor([-40.0, -8.0, raw_log_std(-0.5), 3.0, 40.0], dtype=torch.float64, requires_grad=True)
    log_std = bound_log_std(raw)
    assert (log_std > LOG_STD_MIN).all() and (log_std < LOG_STD_MAX).all()
    assert float(log_std[2].detach()) == pytest.approx(-0.5)
    # Through the loss: a σ driven past a bound must still feel the pull back (a clamp passed none).
    dist = ActionDist(True, 5, (-1.0,) * 5, (1.0,) * 5, "clip")
    out = torch.cat([torch.zeros(5, dtype=torch.float64), raw]).unsqueeze(0)
    log_prob, _ = dist.log_prob_entropy(out, torch.full((1, 5), 0.5, dtype=torch.float64))
    log_prob.sum().backward()
    assert (raw.grad[[1, 3]].abs() > 1e-3).all() and (raw.grad != 0).all()
    np.testing.assert_allclose(bound_log_std(raw.detach().numpy()), log_std.detach().numpy())


@pytest.mark.parametrize(
    "log_std, starts_at", [(-9.0, -4.5), (-4.5, -4.5), (-1.0, -1.0), (0.0, 0.0), (1.5, 1.5), (2.0, 1.5)]
)
def test_raw_log_std_inverts_the_bound_inside_the_range_a_sigma_can_leave(log_std, starts_at):
    raw = torch.tensor(raw_log_std(log_std), dtype=torch.float64, requires_grad=True)
    assert float(bound_log_std(raw.detach())) == pytest.approx(starts_at, abs=1e-9)
    (slope,) = torch.autograd.grad(bound_log_std(raw), raw)
    assert float(slope) > 0.25  # never where the bound is flat


def test_a_saturated_tanh_mean_is_pulled_back_and_a_clipped_one_is_not_penalised():
    # |μ| = 43, where a CI run's Pendulum policy sat: every sample saturates, so with no signal in the
    # advantages only the L2 pull moves μ, towards 0 and harder the further out it is.
    tanh = ActionDist(True, 1, (-2.0,), (2.0,), "tanh", mean_l2_coef=0.5)
    clip = ActionDist(True, 1, (-2.0,), (2.0,), "clip", mean_l2_coef=0.5)
    out = torch.tensor([[43.0, 0.0], [-10.0, 0.0]], dtype=torch.float64, requires_grad=True)
    tanh.mean_penalty(out).backward()
    # d/dμ of 0.5 · mean over the 2 rows of μ²: 0.5 · 2μ / 2
    torch.testing.assert_close(out.grad, torch.tensor([[21.5, 0.0], [-5.0, 0.0]], dtype=torch.float64))
    assert float(clip.mean_penalty(out)) == 0.0
