"""One A3C update in plain torch autograd: what a worker's update computes, written to be read rather than to
be fast. Training never runs it. It is the independent check that both gradient paths are tested against
(tests/algo/test_reference.py): the numpy closed form (``a3c.algo.numpy_mlp``, discrete heads on the MLP)
and autograd (``a3c.algo.loss``, every model). It shares none of their loss code.

It covers every policy head the package trains, read from a model's policy output ``out`` [N, P]:
- Discrete(A): one categorical over A logits;
- MultiDiscrete(nvec): one categorical per dimension over its slice of the logits; MultiBinary(A): A
  independent Bernoullis (log π and the entropy are sums over the dimensions or bits);
- Box(A): a diagonal Gaussian, ``out`` = (mean, raw log σ), over a sample ``u`` that the env gets clipped
  into the bounds ("clip") or squashed into them ("tanh"), with the pull on a raw log σ out where its bound
  is flat and the tanh mean's L2 pull;
and every model: a feed-forward one (the MLP, the conv net) in one batched forward, the conv LSTM unrolled
over the segment one step at a time, as the rollout ran it.

A segment is T steps of B envs. For each step t in env b the update needs the observation, the action taken,
the reward, whether the episode ended there (``terminated``: a true terminal, no future value; ``truncated``:
a time limit, whose future is the value of the real last observation ``final_obs``), and, after the last
step, the observation to bootstrap from (``next_obs``). The pull of the shared weights into the model comes
before the update, the shared optimizer's step after it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributions import Bernoulli, Categorical, Independent, Normal
from torch.distributions.transforms import AffineTransform, ComposeTransform, TanhTransform

from a3c.algo.distributions import INIT_LOG_STD_RANGE, LOG_STD_MAX, LOG_STD_MIN, LOG_STD_PULL_COEF

if TYPE_CHECKING:
    from a3c.algo.distributions import ActionDist
    from a3c.algo.rollout import Segment


def reference_update(  # noqa: PLR0913 - the five hyperparameters by name, as the reader looks them up
    model: nn.Module,
    seg: Segment,
    *,
    gamma: float,
    gae_lambda: float,
    value_coef: float,
    entropy_coef: float,
    max_grad_norm: float,
    dist: ActionDist | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped gradient of one segment's A3C loss for ``model``, and the loss terms.

    Args:
        model: obs [N, ...] → (policy output [N, P], values [N]); a recurrent one (``recurrent`` true) has
            ``step(obs [B, ...], state) → (out [B, P], values [B], next state)`` instead.
        seg: a ``Segment``: obs [T, B, ...], actions [T, B, ...], rewards, terminated, truncated [T, B],
            final_obs [T, B, ...] (read where truncated), next_obs [B, ...], init_state (recurrent: the state
            before step 0, ([B, H], [B, H])).
        dist: the ``ActionDist`` whose fields (kind, n, bounds, squash, mean_l2_coef) say which policy ``out``
            is; None: a categorical over P logits.

    Returns:
        (gradient [params]: every parameter's ``.grad`` in ``model.parameters()`` order, the whole clipped to
        an L2 norm of ``max_grad_norm`` (≤ 0: not clipped); {"policy", "value", "entropy", "mean_penalty",
        "log_std_penalty", "total"} as floats).
    """
    steps, envs = seg.rewards.shape
    out, values, last_values, final_values = forward(model, seg)
    advantages, returns = value_targets(seg, values.detach(), last_values, final_values, gamma, gae_lambda)

    actions = torch.as_tensor(seg.actions).reshape(steps * envs, *seg.actions.shape[2:])
    log_probs, entropies = log_prob_and_entropy(out, actions, dist)
    # The advantages and returns are constants of the loss: only the policy's log-probs and the values learn.
    policy_loss = -(log_probs * advantages.reshape(-1)).mean()
    value_loss = ((values - returns) ** 2).mean()
    entropy = entropies.mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    mean_penalty, log_std_penalty = torch.zeros(()), torch.zeros(())
    if dist is not None and dist.continuous:
        # A raw log σ past the values where its bound's slope falls to 0.27 is pulled back by
        # LOG_STD_PULL_COEF × (the distance)², summed over the dimensions, averaged over the N rows.
        low, high = (raw_log_std_at(x) for x in INIT_LOG_STD_RANGE)
        raw = out[:, dist.n :]
        distance = torch.where(raw > high, raw - high, torch.where(raw < low, low - raw, torch.zeros(())))
        log_std_penalty = LOG_STD_PULL_COEF * (distance**2).sum(-1).mean()
        loss = loss + log_std_penalty
    if dist is not None and dist.continuous and dist.squash == "tanh":
        # Far out in tanh's flat tails every sample gives the same action: the policy gradient on the mean is
        # noise there, and this pull (mean_l2_coef × Σ μ², averaged over the N rows) brings it back. It is the
        # tanh squash's only: under "clip" mean_l2_coef is ignored.
        mean_penalty = dist.mean_l2_coef * (out[:, : dist.n] ** 2).sum(-1).mean()
        loss = loss + mean_penalty

    model.zero_grad()
    loss.backward()
    if max_grad_norm > 0:
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    gradient = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    terms = {"policy": policy_loss, "value": value_loss, "entropy": entropy, "mean_penalty": mean_penalty}
    terms["log_std_penalty"] = log_std_penalty
    return gradient, {name: term.item() for name, term in terms.items()} | {"total": loss.item()}


def forward(model: nn.Module, seg: Segment) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(policy output [T*B, P], values [T, B], V(next_obs) [B], V(final_obs) [T, B] where truncated, 0
    elsewhere); the two bootstrap values carry no gradient (they only enter the targets)."""
    if getattr(model, "recurrent", False):
        return unroll(model, seg)
    steps, envs = seg.rewards.shape
    obs = torch.as_tensor(seg.obs)
    out, values = model(obs.reshape(steps * envs, *obs.shape[2:]))
    with torch.no_grad():
        last_values = model(torch.as_tensor(seg.next_obs))[1]
        final_values = torch.zeros(steps, envs)
        truncated = torch.as_tensor(seg.truncated)
        if truncated.any():
            final_values[truncated] = model(torch.as_tensor(seg.final_obs)[truncated])[1]
    return out, values.reshape(steps, envs), last_values, final_values


def unroll(model: nn.Module, seg: Segment) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``forward`` for a recurrent model: the segment's steps one at a time from ``seg.init_state``, the
    state of an env zeroed after a step where its episode ended (terminated or truncated), as in the rollout.
    """
    steps, envs = seg.rewards.shape
    obs = torch.as_tensor(seg.obs)
    keep = torch.as_tensor(~(seg.terminated | seg.truncated)).float().unsqueeze(-1)  # [T, B, 1]
    # The state the rollout stored; no gradient flows back into the segments before this one.
    state = tuple(x.detach() for x in seg.init_state)
    outs, values = [], []
    final_values = torch.zeros(steps, envs)
    for t in range(steps):
        out, value, state = model.step(obs[t], state)
        outs.append(out)
        values.append(value)
        with torch.no_grad():
            # A truncated episode goes on from its final observation, with the state its last step left.
            for b in seg.truncated[t].nonzero()[0]:
                state_b = tuple(x[b : b + 1] for x in state)
                final_values[t, b] = model.step(torch.as_tensor(seg.final_obs[t, b : b + 1]), state_b)[1][0]
        state = tuple(x * keep[t] for x in state)  # the next episode starts from a zero state
    with torch.no_grad():
        last_values = model.step(torch.as_tensor(seg.next_obs), state)[1]
    return torch.cat(outs), torch.stack(values), last_values, final_values


def value_targets(
    seg: Segment,
    values: torch.Tensor,
    last_values: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages [T, B], returns [T, B]) by GAE(λ) from the segment's values [T, B] (no gradient) and its
    bootstrap values (``forward``'s); the returns ``advantages + values`` are the critic's targets."""
    steps, envs = seg.rewards.shape
    rewards = torch.as_tensor(seg.rewards)
    terminated, truncated = torch.as_tensor(seg.terminated), torch.as_tensor(seg.truncated)
    # The value of what follows step t: V(s_{t+1}) inside the segment, V(next_obs) after its last step,
    # V(final_obs) where the step was truncated (the task went on), and nothing where it terminated.
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)])
    next_values = torch.where(truncated, final_values, next_values)
    next_values = torch.where(terminated, torch.zeros(()), next_values)
    # Backwards over the segment, never across an episode's end. λ = 1: the n-step return (to the end of the
    # segment or of the episode) minus V; λ = 0: the one-step TD error.
    advantages = torch.empty(steps, envs)
    running = torch.zeros(envs)
    for t in reversed(range(steps)):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        goes_on = ~(terminated[t] | truncated[t])
        running = delta + gamma * gae_lambda * goes_on * running
        advantages[t] = running
    return advantages, advantages + values


def log_prob_and_entropy(
    out: torch.Tensor, actions: torch.Tensor, dist: ActionDist | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(a|s) [N], entropy of π(·|s) [N]) of the taken ``actions`` under the policy output ``out``
    [N, P]: actions [N] int64 (Discrete), [N, D] int64 (MultiDiscrete), [N, A] bits (MultiBinary) or [N, A]
    float ``u`` (Box: the Gaussian's sample, stored before clipping or squashing)."""
    if dist is not None and dist.continuous:
        return gaussian_log_prob_and_entropy(out, actions, dist)
    if dist is not None and dist.nvec:
        # Independent dimensions: the joint log-prob and entropy are the sums of the dimensions'.
        choices = [Categorical(logits=part) for part in out.split(list(dist.nvec), dim=-1)]
        log_prob = sum(c.log_prob(a) for c, a in zip(choices, actions.unbind(-1), strict=True))
        return log_prob, sum(c.entropy() for c in choices)
    if dist is not None and dist.binary:
        bits = Independent(Bernoulli(logits=out), 1)  # Independent: sums over the bits
        return bits.log_prob(actions.to(out.dtype)), bits.entropy()
    policy = Categorical(logits=out)
    return policy.log_prob(actions), policy.entropy()


def raw_log_std_at(log_std: float) -> float:
    """The raw value that the bound mid + half·tanh((raw - mid)/half) takes to ``log_std``: its inverse."""
    mid, half = (LOG_STD_MAX + LOG_STD_MIN) / 2, (LOG_STD_MAX - LOG_STD_MIN) / 2
    return mid + half * math.atanh((log_std - mid) / half)


def gaussian_log_prob_and_entropy(
    out: torch.Tensor, u: torch.Tensor, dist: ActionDist
) -> tuple[torch.Tensor, torch.Tensor]:
    """``log_prob_and_entropy`` of a Box policy: ``out`` [N, 2A] = (mean, raw log σ), ``u`` [N, A]."""
    mean, raw_log_std = out[:, : dist.n], out[:, dist.n :]
    # log σ is the raw output bounded smoothly into [LOG_STD_MIN, LOG_STD_MAX] (a tanh, not a clamp, so a σ
    # pushed past a bound still has a gradient back).
    mid, half = (LOG_STD_MAX + LOG_STD_MIN) / 2, (LOG_STD_MAX - LOG_STD_MIN) / 2
    std = torch.exp(mid + half * torch.tanh((raw_log_std - mid) / half))
    gaussian = Independent(Normal(mean, std), 1)  # Independent: sums over the A dimensions
    if dist.squash == "clip":
        # The env's clip is not part of the policy (as in SB3): the Gaussian's log-prob of u, its entropy.
        return gaussian.log_prob(u), gaussian.entropy()
    # "tanh": the policy is the distribution of the action the env got, a = squash(u) =
    # low + (tanh(u) + 1)(high - low)/2, by the change of variables log π(a) = log N(u; μ, σ) - log|da/du|.
    low, high = torch.tensor(dist.low), torch.tensor(dist.high)
    squash = ComposeTransform([TanhTransform(), AffineTransform((high + low) / 2, (high - low) / 2)])

    def log_det(v: torch.Tensor) -> torch.Tensor:  # log|da/du| [N], summed over the dimensions
        return squash.log_abs_det_jacobian(v, squash(v)).sum(-1)

    # H(a) = H(N(μ, σ)) + E_u[log|da/du|] has no closed form: a one-sample estimate at the stored u, written
    # u = μ + σ·ε with ε held fixed, so that the entropy bonus's gradient reaches μ and σ through it.
    eps = ((u - mean) / std).detach()
    return gaussian.log_prob(u) - log_det(u), gaussian.entropy() + log_det(mean + std * eps)
