"""Action distributions: the policy head's output → actions (numpy, for rollouts and greedy play) and
log-probabilities and entropies (torch, for the loss).

A policy output ``out`` is one array per observation:
- Discrete(A): ``out`` [N, A] logits of a categorical policy.
- MultiDiscrete(nvec): ``out`` [N, sum(nvec)] logits, one categorical per dimension; MultiBinary(A): ``out``
  [N, A] logits, one Bernoulli per bit. Their actions are int64 [N, D] and int8 [N, A], what the env takes;
  the dimensions (bits) are independent, so log π(a) and the entropy are sums over them (as SB3's
  MultiCategoricalDistribution and BernoulliDistribution). Sampled by Gumbel-max per dimension, or logistic
  noise per bit.
- Box(A): ``out`` [N, 2A] = (mean, raw log σ) of a diagonal Gaussian over an unbounded ``u``; log σ is the raw
  value bounded smoothly into [LOG_STD_MIN, LOG_STD_MAX] (``bound_log_std``), and the raw value is pulled
  back where that bound turns flat (``log_std_penalty``). The env gets
  ``u`` clipped to the bounds ("clip", as SB3 does: the log-prob is that of ``u``, the sample that was drawn),
  or squashed into them, ``low + (tanh(u) + 1)(high - low)/2`` ("tanh": the log-prob carries the change of
  variables' Jacobian, so it is the exact density of the action the env got, and so does the entropy).
The rollout stores ``u``, never the env action, so the loss sees exactly what was sampled. ``action_dist``
gives the ``ActionDist`` of an env's action space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from a3c.core.spaces import Spaces, action_kind

if TYPE_CHECKING:
    import gymnasium as gym

# Bounds on log σ: σ in (e^-5, e^2), as CleanRL's SAC. Reached smoothly (``bound_log_std``), never clamped: a
# clamp passes no gradient once the raw value is past a bound, so a σ pushed there could never come back.
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
_LOG_STD_MID, _LOG_STD_HALF = (LOG_STD_MAX + LOG_STD_MIN) / 2, (LOG_STD_MAX - LOG_STD_MIN) / 2
# Where a model may start (``init_log_std``) or an older checkpoint's log σ is moved to: 0.5 inside each
# bound, where the bound's slope is still 1 - (3/3.5)² = 0.27 (it tends to 0 at the bounds themselves).
# Past them the raw log σ is pulled back (``LOG_STD_PULL_COEF``, ``ActionDist.log_std_penalty``).
INIT_LOG_STD_RANGE = (LOG_STD_MIN + 0.5, LOG_STD_MAX - 0.5)
# The weight of the pull: coef × (raw past the range)², summed over the action dimensions and averaged over
# the rows. A steady push of g on log σ (g·slope on the raw value) is met where 2·coef·excess = g·slope:
# 0.12 raw units out for g = 1 (advantages of about 1), 0.86 for g = 10, 2.9 for g = 100.
LOG_STD_PULL_COEF = 1.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG_2 = math.log(2.0)


def log_tanh_jacobian(u: torch.Tensor) -> torch.Tensor:
    """log(1 - tanh(u)²) elementwise, as 2(log 2 - u - softplus(-2u)): exact where tanh saturates (a
    ``+ eps`` inside the log would floor it, and its gradient would vanish exactly where it matters)."""
    return 2.0 * (_LOG_2 - u - torch.nn.functional.softplus(-2.0 * u))


def bound_log_std(raw: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """log σ from the policy's raw output (any shape, numpy or torch): mid + half·tanh((raw - mid)/half), with
    mid and half those of [LOG_STD_MIN, LOG_STD_MAX] (-1.5 and 3.5). Close to the identity in the middle
    (slope 1 at mid; at log σ 0, raw 0.10, it is 1 - (1.5/3.5)² = 0.82; a raw 0 is log σ -0.09, σ 0.92),
    inside the bounds everywhere, and its slope sech² never reaches 0. It does fall fast: 0.27 at
    ``INIT_LOG_STD_RANGE``, 0.09 two raw units further out. Adam moves a parameter by about its lr per step
    whatever its gradient's size, so a push kept up drove the raw value far into that flat part, and it took
    as long to come back: ``ActionDist.log_std_penalty`` stops it near the range instead."""
    tanh = torch.tanh if isinstance(raw, torch.Tensor) else np.tanh
    return _LOG_STD_MID + _LOG_STD_HALF * tanh((raw - _LOG_STD_MID) / _LOG_STD_HALF)


def raw_log_std(log_std: float) -> float:
    """The raw value whose ``bound_log_std`` is ``log_std`` (for initialising a model), ``log_std`` first
    moved into ``INIT_LOG_STD_RANGE``: a raw value far out, where the bound is flat, would barely move."""
    low, high = INIT_LOG_STD_RANGE
    inside = (min(max(log_std, low), high) - _LOG_STD_MID) / _LOG_STD_HALF
    return _LOG_STD_MID + _LOG_STD_HALF * math.atanh(inside)


# The raw values of ``INIT_LOG_STD_RANGE`` (about -5.99 and 2.99): ``log_std_penalty`` is 0 between them.
RAW_LOG_STD_RANGE = (raw_log_std(INIT_LOG_STD_RANGE[0]), raw_log_std(INIT_LOG_STD_RANGE[1]))


@dataclass(frozen=True)
class ActionDist:
    """The action distribution of one env's action space.

    Args:
        continuous: Box actions (Gaussian) instead of discrete ones.
        n: the number of actions (Discrete), action dimensions (Box), logits (MultiDiscrete: sum(nvec)) or
            bits (MultiBinary): ``Spaces.n_actions``.
        low, high: a Box's bounds [n]. squash: "clip" or "tanh" (see the module docstring).
        nvec: MultiDiscrete: the choices per action dimension (empty otherwise).
        binary: MultiBinary: ``n`` independent bits.
        mean_l2_coef: tanh-squashed Box only: the weight of ``mean_penalty`` in the loss.
    """

    continuous: bool
    n: int
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    squash: str = "clip"
    nvec: tuple[int, ...] = ()
    binary: bool = False
    mean_l2_coef: float = 0.0

    @classmethod
    def of_spaces(cls, spaces: Spaces, squash: str = "clip") -> ActionDist:
        """The distribution of the actions of ``spaces`` (a checkpoint's, or ``a3c_envs.inspect_env``'s);
        ``squash`` applies to Box actions only."""
        return cls(
            spaces.continuous,
            spaces.n_actions,
            spaces.action_low,
            spaces.action_high,
            squash if spaces.continuous else "clip",
            spaces.action_nvec,
            spaces.multi_binary,
        )

    @property
    def kind(self) -> str:
        """The kind: "discrete", "box", "multi_discrete" or "multi_binary" (``core.spaces.action_kind``)."""
        return action_kind(self.continuous, self.nvec, self.binary)

    @property
    def out_size(self) -> int:
        """Values of ``out`` per observation: n logits, or 2n (mean and log σ)."""
        return 2 * self.n if self.continuous else self.n

    @property
    def action_shape(self) -> tuple[int, ...]:
        """One action's shape as stored: () Discrete, (n,) Box and MultiBinary, (len(nvec),) MultiDiscrete."""
        if self.nvec:
            return (len(self.nvec),)
        return (self.n,) if self.continuous or self.binary else ()

    @property
    def action_dtype(self) -> type:
        """The stored actions' dtype: float32 for Box (the sample ``u``), int8 for bits, else int64."""
        if self.continuous:
            return np.float32
        return np.int8 if self.binary else np.int64

    # -- numpy: rollouts and greedy play --------------------------------------------------------------------

    def noise(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Noise for ``shape`` = (T, B) samples at once, [T, B, n]: Gumbel (Discrete, MultiDiscrete),
        logistic (MultiBinary) or N(0, 1) (Box)."""
        draw = rng.standard_normal if self.continuous else rng.logistic if self.binary else rng.gumbel
        return draw(size=(*shape, self.n)).astype(np.float32)

    def sample(self, out: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Samples of the policies ``out`` [B, P] with ``noise`` [B, n]: Discrete int64 [B], MultiDiscrete
        int64 [B, D], MultiBinary int8 [B, n], Box float32 ``u`` [B, n].

        argmax(logits + Gumbel noise) is an exact draw from softmax(logits) with no softmax (per dimension for
        MultiDiscrete); logit + logistic noise > 0 is a bit drawn with P(1) = sigmoid(logit).
        ``out`` is overwritten (it is a scratch array of the policy's forward).
        """
        if not self.continuous:
            out += noise
            return self.greedy(out)
        mean, log_std = out[:, : self.n], bound_log_std(out[:, self.n :])
        return mean + np.exp(log_std) * noise

    def greedy(self, out: np.ndarray) -> np.ndarray:
        """The most likely action of each policy in ``out`` [B, P], as the env takes it: the argmax (per
        dimension for MultiDiscrete), the bits whose logit is > 0, or the Gaussian's mean clipped or
        squashed into the bounds."""
        if self.continuous:
            return self.env_action(out[:, : self.n])
        if self.nvec:
            return group_argmax(out, self.nvec)
        return bits_from_logits(out) if self.binary else out.argmax(axis=-1)

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        # Made once, not on every env step.
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)

    def env_action(self, u: np.ndarray) -> np.ndarray:
        """What the env gets for sampled actions: Box ``u`` [B, n] clipped or squashed into the bounds
        (float32); any other kind's actions as they are."""
        if not self.continuous:
            return u
        low, high = self._bounds
        if self.squash == "tanh":
            return (low + (np.tanh(u) + 1.0) * 0.5 * (high - low)).astype(np.float32)
        return np.clip(u, low, high).astype(np.float32)

    # -- torch: the loss -----------------------------------------------------------------------------------

    def log_prob_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π(a|s) [N], entropy [N]) of stored ``actions`` (Discrete [N] int64, MultiDiscrete [N, D]
        int64, MultiBinary [N, n] bits, Box ``u`` [N, n]) under ``out``.

        MultiDiscrete and MultiBinary: sums over the dimensions or bits.

        Box: sums over the action dimensions. With "clip" both are the Gaussian's (the env's clipping is not
        part of the policy, as in SB3). With "tanh" both are those of the squashed action the env got:

            log π(a) = log N(u; μ, σ) - Σ log(1 - tanh(u)²) - Σ log((high - low)/2)
            H(a)     = H(N(μ, σ)) + E_u[Σ log(1 - tanh(u)²)] + Σ log((high - low)/2)

        The squashed entropy has no closed form; the expectation is estimated with the stored sample,
        reparameterised as u = μ + σ·ε with ε = (u - μ)/σ held fixed, so its gradient reaches μ and σ
        (an unbiased one-sample estimate of the entropy and of its gradient). The Gaussian's entropy alone
        (what SAC-style code often uses) grows with σ without bound, while the squashed action's entropy
        falls once the mass piles onto the bounds: its bonus would push σ up forever.
        """
        if self.nvec:
            return multi_categorical_log_prob_entropy(out, actions, self.nvec)
        if self.binary:
            return bernoulli_log_prob_entropy(out, actions)
        if not self.continuous:
            log_p = torch.log_softmax(out, dim=-1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            return log_p.gather(1, actions.unsqueeze(1)).squeeze(1), entropy
        mean, log_std = out[:, : self.n], bound_log_std(out[:, self.n :])
        z = (actions - mean) * torch.exp(-log_std)
        log_prob = (-0.5 * z.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)
        entropy = (log_std + 0.5 + _HALF_LOG_2PI).sum(-1)
        if self.squash == "tanh":
            log_half_range = self._log_half_range.to(out.dtype)
            log_prob = log_prob - log_tanh_jacobian(actions).sum(-1) - log_half_range
            u = mean + torch.exp(log_std) * z.detach()  # == actions, with a path to μ and σ
            entropy = entropy + log_tanh_jacobian(u).sum(-1) + log_half_range
        return log_prob, entropy

    def penalty(self, out: torch.Tensor) -> torch.Tensor:
        """The distribution's own terms of the loss for ``out`` [N, P]: a Box's ``log_std_penalty`` plus its
        ``mean_penalty``; a scalar 0 for any other kind."""
        if not self.continuous:
            return out.new_zeros(())
        return self.log_std_penalty(out) + self.mean_penalty(out)

    def log_std_penalty(self, out: torch.Tensor) -> torch.Tensor:
        """``LOG_STD_PULL_COEF`` × the mean over the N rows of Σ (how far the raw log σ is outside
        ``RAW_LOG_STD_RANGE``)² over the action dimensions, for a Box's ``out`` [N, 2A] (either squash, a
        learned or a state-dependent σ alike): a term of the loss, 0 inside the range.

        Past the range ``bound_log_std`` is nearly flat, but Adam still moves the raw value by about its lr
        per step while a push lasts, and it took as many steps to come back. A pull on the loss, not a
        projection of the parameter after the step: a state-dependent raw log σ is an output of the net, no
        parameter to clamp. A pull is a term of the gradient a worker computes on its own copy, applied by
        the lock-free shared step like any other, on every backend. A clamp of the shared parameter would
        race with the other workers' steps, harmlessly (at worst one worker's update of those few values
        lost, what Hogwild already allows), but every backend's step would have to remember it, and Adam's
        moments would go on pushing into the clamp."""
        low, high = RAW_LOG_STD_RANGE
        raw = out[:, self.n :]
        outside = F.relu(raw - high) + F.relu(low - raw)  # at most one of the two is non-zero
        return LOG_STD_PULL_COEF * outside.pow(2).sum(-1).mean()

    @property
    def pulls_mean(self) -> bool:
        """Whether ``mean_penalty`` is a term of the loss: a tanh-squashed Gaussian with a mean pull."""
        return self.continuous and self.squash == "tanh" and self.mean_l2_coef > 0

    def mean_penalty(self, out: torch.Tensor) -> torch.Tensor:
        """``mean_l2_coef`` × the mean over the N rows of Σ μ² over the action dimensions, for ``out`` [N, 2A]
        of a tanh-squashed Gaussian: a term of the loss (a scalar 0 for any other distribution).

        Once |μ| ≫ σ every sample lands in tanh's flat tails: all give the same env action, so the policy
        gradient on μ is noise and Adam random-walks it further out. This L2 pull (SAC's first version used
        one) grows with |μ|, so it wins there, and costs little near 0."""
        if not self.pulls_mean:
            return out.new_zeros(())
        return self.mean_l2_coef * out[:, : self.n].pow(2).sum(-1).mean()

    @cached_property
    def _log_half_range(self) -> torch.Tensor:
        """Σ log((high - low)/2) over the action dimensions: the affine part of the squash's Jacobian."""
        high, low = torch.tensor(self.high, dtype=torch.float64), torch.tensor(self.low, dtype=torch.float64)
        half_range = (high - low) * 0.5
        return torch.log(half_range).sum()


def group_argmax(x: np.ndarray, nvec: tuple[int, ...]) -> np.ndarray:
    """x [B, sum(nvec)] → the argmax within each dimension's slice, int64 [B, len(nvec)] (the first of
    equal values, as ``argmax``)."""
    if len(set(nvec)) == 1:  # equal sizes (the common case): one reshape, no loop
        return x.reshape(x.shape[0], len(nvec), nvec[0]).argmax(axis=-1)
    ends = np.cumsum(nvec)
    return np.stack([x[:, end - size : end].argmax(axis=1) for size, end in zip(nvec, ends, strict=True)], 1)


def bits_from_logits(x: np.ndarray) -> np.ndarray:
    """The bits where ``x`` [B, n] > 0, as int8 [B, n] (MultiBinary's dtype). With ``x`` = logits: the most
    likely bits; with logits + logistic noise: a draw of each bit with P(1) = sigmoid(logit)."""
    return (x > 0).astype(np.int8)


def multi_categorical_log_prob_entropy(
    logits: torch.Tensor, actions: torch.Tensor, nvec: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(a) [N], entropy [N]) of ``actions`` [N, D] int64 under one categorical per dimension, each over
    its slice of ``logits`` [N, sum(nvec)]; both are sums over the D dimensions."""
    if len(set(nvec)) == 1:
        log_p = torch.log_softmax(logits.reshape(logits.shape[0], len(nvec), nvec[0]), dim=-1)
        taken = log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return taken.sum(-1), -(log_p.exp() * log_p).sum((-2, -1))
    log_prob = logits.new_zeros(logits.shape[0])
    entropy = logits.new_zeros(logits.shape[0])
    for k, part in enumerate(torch.split(logits, list(nvec), dim=-1)):
        log_p = torch.log_softmax(part, dim=-1)
        log_prob = log_prob + log_p.gather(1, actions[:, k : k + 1]).squeeze(1)
        entropy = entropy - (log_p.exp() * log_p).sum(-1)
    return log_prob, entropy


def bernoulli_log_prob_entropy(logits: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(b) [N], entropy [N]) of ``bits`` [N, n] (0/1, any dtype) under independent Bernoullis with
    ``logits`` [N, n]; both are sums over the bits.

    log P(b) = b·l - softplus(l) (log sigmoid(l) for a 1, log sigmoid(-l) for a 0), and the entropy of one
    bit is softplus(l) - l·sigmoid(l): both exact for large |l|, where log(p) of a rounded p would not be.
    """
    softplus = F.softplus(logits)
    log_prob = (bits.to(logits.dtype) * logits - softplus).sum(-1)
    entropy = (softplus - logits * torch.sigmoid(logits)).sum(-1)
    return log_prob, entropy


def action_dist(space: gym.Space, squash: str = "clip", mean_l2_coef: float = 0.0) -> ActionDist:
    """The ``ActionDist`` of an env's (single) action space, one ``a3c_envs.space_check.check_spaces`` takes;
    ``squash`` and ``mean_l2_coef`` apply to Box actions."""
    from gymnasium import spaces  # here, not at the top: a loaded policy acts without gymnasium (a3c.load)

    if isinstance(space, spaces.Discrete):
        return ActionDist(False, int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = tuple(int(x) for x in space.nvec)
        return ActionDist(False, sum(nvec), nvec=nvec)
    if isinstance(space, spaces.MultiBinary):
        return ActionDist(False, int(space.shape[0]), binary=True)
    return ActionDist(
        True,
        int(space.shape[0]),
        tuple(map(float, space.low)),
        tuple(map(float, space.high)),
        squash,
        mean_l2_coef=mean_l2_coef,
    )
