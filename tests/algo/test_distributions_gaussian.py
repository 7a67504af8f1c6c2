"""The Gaussian head in float64: the entropy's gradient by finite differences (both squashes, through μ and
the raw log σ), the Box loss against one built here from ``torch.distributions``, and the pull that keeps
the raw log σ out of the flat part of its bound under Adam.

The numpy closed-form gradient (``numpy_mlp.MlpGradient``) takes discrete heads only (a Box is a
ValueError there), so the Box's gradient has one production path: ``ActionDist.log_prob_entropy`` and
``ActionDist.penalty``, what ``loss.segment_loss`` calls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from a3c.algo.distributions import (
    INIT_LOG_STD_RANGE,
    LOG_STD_MAX,
    LOG_STD_MIN,
    LOG_STD_PULL_COEF,
    RAW_LOG_STD_RANGE,
    ActionDist,
    bound_log_std,
)
from a3c.algo.loss import a2c_loss
from a3c.algo.networks import ActorCritic
from a3c.algo.optim import SharedAdam, attach_flat_grad, flatten_parameters

LOW, HIGH = (-2.0, 0.0, -1.0), (2.0, 0.5, 3.0)  # unequal ranges: the affine part differs per dimension
DIMS = len(LOW)


def box(squash: str, mean_l2_coef: float = 0.0) -> ActionDist:
    return ActionDist(True, DIMS, LOW, HIGH, squash, mean_l2_coef=mean_l2_coef)


def random_head(rng: np.random.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(``out`` [n, 2·DIMS] float64: means, some out in tanh's tails, and raw log σ, some past
    ``RAW_LOG_STD_RANGE`` on either side; ε [n, DIMS], the noise of the stored samples)."""
    mean = rng.normal(scale=2.0, size=(n, DIMS))
    raw = rng.uniform(RAW_LOG_STD_RANGE[0] - 2.0, RAW_LOG_STD_RANGE[1] + 1.0, size=(n, DIMS))
    raw[0], raw[1] = RAW_LOG_STD_RANGE[0] - 1.5, RAW_LOG_STD_RANGE[1] + 0.7  # both sides surely covered
    out = torch.tensor(np.concatenate([mean, raw], axis=1), dtype=torch.float64)
    return out, torch.tensor(rng.normal(size=(n, DIMS)), dtype=torch.float64)


def stored_sample(out: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """u = μ + σ·ε [n, DIMS]: what the rollout stores for the policy ``out`` and the noise ε."""
    return out[:, :DIMS] + bound_log_std(out[:, DIMS:]).exp() * eps


# -- 1. The entropy's gradient by finite differences -----------------------------------------------------


def entropy_at(dist: ActionDist, out: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """Σ over the rows of the entropy (with "tanh": its one-sample estimate) that the loss takes for the
    sample drawn with ε from ``out``: the sample moves with μ and σ, ε stays."""
    return dist.log_prob_entropy(out, stored_sample(out, eps))[1].sum()


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_the_entropys_gradient_through_mean_and_raw_log_std_is_its_finite_difference(squash):
    """The loss sees a stored sample u, fixed; the squashed entropy's estimate reparameterises it as
    u = μ + σ·ε with ε fixed, so its gradient is the derivative along that path: the central difference of
    ``entropy_at`` in each of μ and the raw log σ (a mean detached there loses the Jacobian's -2·tanh(u))."""
    dist = box(squash)
    out, eps = random_head(np.random.default_rng(1), 8)
    u = stored_sample(out, eps)
    leaf = out.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(dist.log_prob_entropy(leaf, u)[1].sum(), leaf)
    h = 1e-6
    numeric = torch.zeros_like(out)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            step = torch.zeros_like(out)
            step[i, j] = h
            numeric[i, j] = (entropy_at(dist, out + step, eps) - entropy_at(dist, out - step, eps)) / (2 * h)
    torch.testing.assert_close(grad, numeric, rtol=1e-6, atol=1e-8)
    if squash == "clip":  # the Gaussian's entropy has no μ in it
        assert (grad[:, :DIMS] == 0).all()
    else:  # the tanh Jacobian's -2·tanh(u) reaches μ: large where the sample is out in the tails
        assert grad[:, :DIMS].abs().max() > 1.0


def stored_sample_1d(out: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """``stored_sample`` for one action dimension: ``out`` [n, 2], ε [n, 1]."""
    return out[:, :1] + bound_log_std(out[:, 1:]).exp() * eps


def squashed_entropy(mean: float, raw: float, half_range: float, nodes: np.ndarray, weights: np.ndarray):
    """The exact entropy of a = c + half_range·tanh(u), u ~ N(mean, σ(raw)), by Gauss-Hermite quadrature of
    -E[log p(a)] from torch's TransformedDistribution: log p(a) = log N(u) - log|da/du|, read from u."""
    std = math.exp(float(bound_log_std(torch.tensor(raw, dtype=torch.float64))))
    u = torch.tensor(mean + std * nodes, dtype=torch.float64)
    squashed = TransformedDistribution(
        Normal(torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64)),
        [TanhTransform(cache_size=1), AffineTransform(0.0, half_range, cache_size=1)],
    )
    a = u
    for t in squashed.transforms:  # forward through the same (caching) transforms: log_prob then reads u
        a = t(a)
    return -float((squashed.log_prob(a) * torch.tensor(weights)).sum())


@pytest.mark.parametrize("mean, raw", [(0.3, -1.0), (-2.5, 0.5), (4.0, -6.5), (0.0, 3.5)])
def test_the_squashed_entropy_estimates_gradient_is_unbiased(mean, raw):
    """Averaged over ε (Gauss-Hermite nodes for the expectation), the estimate's gradient is the gradient
    of the squashed action's exact entropy (by central differences of the quadrature)."""
    half_range = 1.5
    dist = ActionDist(True, 1, (-half_range,), (half_range,), "tanh")
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / math.sqrt(2 * math.pi)  # an expectation over N(0, 1)
    out = torch.tensor([[mean, raw]], dtype=torch.float64).repeat(len(nodes), 1).requires_grad_(True)
    eps = torch.tensor(nodes, dtype=torch.float64).unsqueeze(1)
    _, estimates = dist.log_prob_entropy(out, stored_sample_1d(out.detach(), eps))
    (grad,) = torch.autograd.grad((estimates * torch.tensor(weights)).sum(), out)
    expected_grad = grad.sum(0)  # d/dμ and d/draw of E_ε[estimate]
    h = 1e-5

    def exact(m: float, r: float) -> float:
        return squashed_entropy(m, r, half_range, nodes, weights)

    numeric = [
        (exact(mean + h, raw) - exact(mean - h, raw)) / (2 * h),
        (exact(mean, raw + h) - exact(mean, raw - h)) / (2 * h),
    ]
    torch.testing.assert_close(
        expected_grad, torch.tensor(numeric, dtype=torch.float64), rtol=1e-6, atol=1e-8
    )
    assert float((estimates.detach() * torch.tensor(weights)).sum()) == pytest.approx(
        exact(mean, raw), abs=1e-9
    )


# -- 2. The Box loss against torch.distributions ---------------------------------------------------------


def reference_policy_loss(
    out: torch.Tensor,
    u: torch.Tensor,
    adv: torch.Tensor,
    squash: str,
    entropy_coef: float,
    mean_l2_coef: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log π [n], entropy [n], loss) built from torch.distributions: Normal, and for "tanh" a
    TransformedDistribution(Normal, [TanhTransform, AffineTransform]) whose log-prob is that of the action the
    env got. The "tanh" entropy is what the package computes, a one-sample estimate: the Normal's entropy plus
    the transforms' log|da/du| at u = μ + σ·ε, ε = (u - μ)/σ held fixed. The loss: -mean(log π·A)
    - c·mean(H) + the pull on a raw log σ outside its range + (tanh) the mean's L2 pull."""
    mean, raw = out[:, :DIMS], out[:, DIMS:]
    mid, half = (LOG_STD_MAX + LOG_STD_MIN) / 2, (LOG_STD_MAX - LOG_STD_MIN) / 2
    std = torch.exp(mid + half * torch.tanh((raw - mid) / half))
    normal = Normal(mean, std)
    entropy = normal.entropy().sum(-1)
    if squash == "clip":
        log_prob = normal.log_prob(u).sum(-1)
    else:
        low, high = torch.tensor(LOW, dtype=torch.float64), torch.tensor(HIGH, dtype=torch.float64)
        transforms = [
            TanhTransform(cache_size=1),
            AffineTransform((high + low) / 2, (high - low) / 2, cache_size=1),
        ]
        squashed = TransformedDistribution(normal, transforms)
        a = u
        for t in transforms:
            a = t(a)
        log_prob = squashed.log_prob(a).sum(-1)  # inverts through the caches: exact even where tanh saturates

        def log_det(v: torch.Tensor) -> torch.Tensor:
            total, x = torch.zeros(v.shape[0], dtype=v.dtype), v
            for t in transforms:
                y = t(x)
                total = total + t.log_abs_det_jacobian(x, y).sum(-1)
                x = y
            return total

        eps = ((u - mean) / std).detach()
        entropy = entropy + log_det(mean + std * eps)
    loss = -(log_prob * adv).mean() - entropy_coef * entropy.mean()
    low_raw, high_raw = (mid + half * math.atanh((x - mid) / half) for x in INIT_LOG_STD_RANGE)
    outside = torch.clamp(raw - high_raw, min=0) + torch.clamp(low_raw - raw, min=0)
    loss = loss + LOG_STD_PULL_COEF * (outside**2).sum(-1).mean()
    if squash == "tanh":
        loss = loss + mean_l2_coef * (mean**2).sum(-1).mean()
    return log_prob, entropy, loss


@pytest.mark.parametrize("squash", ["clip", "tanh"])
@pytest.mark.parametrize("mean_l2_coef", [0.0, 0.1])
def test_the_box_loss_and_its_gradient_match_torch_distributions(squash, mean_l2_coef):
    rng = np.random.default_rng(5)
    out, eps = random_head(rng, 32)
    u = stored_sample(out, eps)
    adv = torch.tensor(rng.normal(scale=3.0, size=32), dtype=torch.float64)
    values, returns = torch.zeros(32, dtype=torch.float64), torch.zeros(32, dtype=torch.float64)
    entropy_coef = 0.05
    dist = box(squash, mean_l2_coef)

    ours_out = out.clone().requires_grad_(True)
    log_prob, entropy = dist.log_prob_entropy(ours_out, u)
    terms = a2c_loss(log_prob, entropy, values, adv, returns, value_coef=0.5, entropy_coef=entropy_coef)
    loss = terms.total + dist.penalty(ours_out)  # as segment_loss adds it
    (grad,) = torch.autograd.grad(loss, ours_out)

    ref_out = out.clone().requires_grad_(True)
    ref_log_prob, ref_entropy, ref_loss = reference_policy_loss(
        ref_out, u, adv, squash, entropy_coef, mean_l2_coef
    )
    (ref_grad,) = torch.autograd.grad(ref_loss, ref_out)

    torch.testing.assert_close(log_prob, ref_log_prob, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(entropy, ref_entropy, rtol=1e-10, atol=1e-10)
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-10, abs=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-12)
    assert float(dist.log_std_penalty(out)) > 0  # the pull is in play on this data


# -- 3. The raw log σ kept out of the flat part of its bound ---------------------------------------------


def pushed_raw_log_std(model: ActorCritic, dist: ActionDist, obs: torch.Tensor, pushes: list[float]):
    """One shared-Adam step (lr 0.05) of ``model`` per push p on p·mean(log σ) + the distribution's penalty
    (p > 0 drives σ down, p < 0 up), from fresh moments; the raw log σ of every row of ``obs`` after each
    step [steps, rows, A]."""
    grad = attach_flat_grad(model, flatten_parameters(model))
    optimizer = SharedAdam(model.parameters(), lr=0.05)
    trace = []
    for push in pushes:
        out = model.policy_logits(obs)
        loss = push * bound_log_std(out[:, dist.n :]).sum(-1).mean() + dist.penalty(out)
        grad.zero_()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            trace.append(model.policy_logits(obs)[:, dist.n :])
    return torch.stack(trace)


def steps_until(inside: torch.Tensor) -> int:
    """The steps until ``inside`` [steps, ...] first holds for every element (one past the end: never)."""
    every = inside.flatten(1).all(1)
    return int(every.nonzero()[0, 0]) + 1 if every.any() else len(every) + 1


@pytest.mark.parametrize(
    "state_std, push, stops_within, back_after",
    [(False, 1.0, 0.2, 9), (True, -1.0, 0.9, 2)],
    ids=["learned-down", "state-up"],
)
def test_a_pushed_log_std_stops_near_its_range_and_comes_back_at_once(
    state_std, push, stops_within, back_after
):
    """200 steps of a push of 1 per dimension on log σ, then 200 of the opposite one, on the MLP's learned
    log σ (one parameter per dimension) and on a state-dependent one (an output of the policy head, moved by
    its weights as well as its bias, so by more per step). Adam moves each parameter by about its lr (0.05
    here) per step whatever its gradient's size. Without the pull (measured): the learned raw log σ went
    0.85 past its range and took 67 steps to come back, the state-dependent one 11.0 and not back in 200.
    With it, it stops within ``stops_within`` of ``RAW_LOG_STD_RANGE`` (Adam's momentum overshoots the
    balance 0.12 out) and is back inside ``back_after`` steps after the push turns (the momentum turning)."""
    torch.manual_seed(0)
    model = ActorCritic(2, 2, (8,), continuous=True, state_std=state_std, init_log_std=0.0).double()
    obs = torch.randn(16, 2, dtype=torch.float64)
    dist = ActionDist(True, 2, (-1.0, -1.0), (1.0, 1.0), "clip")
    trace = pushed_raw_log_std(model, dist, obs, [push] * 200 + [-push] * 200)  # [400, rows, 2]
    low, high = RAW_LOG_STD_RANGE
    pushed, released = trace[:200], trace[200:]
    if push > 0:  # down: the raw value past ``low``, and the steps until every row is above it again
        past, back = float((low - pushed).max()), steps_until(released > low)
    else:
        past, back = float((pushed - high).max()), steps_until(released < high)
    assert 0 < past < stops_within
    assert back == back_after
