"""Action distributions: the policy head's output → actions (numpy, for rollouts and greedy play) and
log-probabilities and entropies (torch, for the loss).

A policy output ``out`` is one array per observation:
- Discrete(A): ``out`` [N, A] logits of a categorical policy.
- Box(A): ``out`` [N, 2A] = (mean, log_std) of a diagonal Gaussian over an unbounded ``u``. The env gets
  ``u`` clipped to the bounds ("clip", as SB3 does: the log-prob is that of ``u``, the sample that was drawn),
  or squashed into them, ``low + (tanh(u) + 1)(high - low)/2`` ("tanh": the log-prob carries the change of
  variables' Jacobian, so it is the exact density of the action the env got, and so does the entropy).
The rollout stores ``u``, never the env action, so the loss sees exactly what was sampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

# Bounds on log σ: σ in [e^-20, e^2]. The rollout (numpy) and the loss (torch) clamp alike.
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG_2 = math.log(2.0)


def log_tanh_jacobian(u: torch.Tensor) -> torch.Tensor:
    """log(1 - tanh(u)²) elementwise, as 2(log 2 - u - softplus(-2u)): exact where tanh saturates (a
    ``+ eps`` inside the log would floor it, and its gradient would vanish exactly where it matters)."""
    return 2.0 * (_LOG_2 - u - torch.nn.functional.softplus(-2.0 * u))


@dataclass(frozen=True)
class ActionDist:
    """The action distribution of one env's action space.

    Args:
        continuous: Box actions (Gaussian) instead of Discrete ones (categorical).
        n: the number of actions (Discrete) or action dimensions (Box).
        low, high: a Box's bounds [n]. squash: "clip" or "tanh" (see the module docstring).
    """

    continuous: bool
    n: int
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    squash: str = "clip"

    @property
    def out_size(self) -> int:
        """Values of ``out`` per observation: A logits, or 2A (mean and log σ)."""
        return 2 * self.n if self.continuous else self.n

    # -- numpy: rollouts and greedy play --------------------------------------------------------------------

    def noise(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Noise for ``shape`` = (T, B) samples at once: Gumbel [T, B, A] (discrete) or N(0, 1) [T, B, A]."""
        draw = rng.standard_normal if self.continuous else rng.gumbel
        return draw(size=(*shape, self.n)).astype(np.float32)

    def sample(self, out: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Samples of the policies ``out`` [B, P] with ``noise`` [B, A]: int64 [B] or float32 ``u`` [B, A].

        Discrete: argmax(logits + Gumbel noise) is an exact draw from softmax(logits) with no softmax.
        ``out`` is overwritten (it is a scratch array of the policy's forward).
        """
        if not self.continuous:
            out += noise
            return out.argmax(axis=1)
        mean, log_std = out[:, : self.n], np.clip(out[:, self.n :], LOG_STD_MIN, LOG_STD_MAX)
        return mean + np.exp(log_std) * noise

    def greedy(self, out: np.ndarray) -> np.ndarray:
        """The most likely action of each policy in ``out`` [B, P], as the env takes it."""
        if not self.continuous:
            return out.argmax(axis=-1)
        return self.env_action(out[:, : self.n])

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        # Made once, not on every env step.
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)

    def env_action(self, u: np.ndarray) -> np.ndarray:
        """What the env gets for sampled ``u`` [B, A]: clipped or squashed into the bounds (float32)."""
        low, high = self._bounds
        if self.squash == "tanh":
            return (low + (np.tanh(u) + 1.0) * 0.5 * (high - low)).astype(np.float32)
        return np.clip(u, low, high).astype(np.float32)

    # -- torch: the loss -----------------------------------------------------------------------------------

    def log_prob_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π(a|s) [N], entropy [N]) of stored ``actions`` ([N] int64, or ``u`` [N, A]) under ``out``.

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
        if not self.continuous:
            log_p = torch.log_softmax(out, dim=-1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            return log_p.gather(1, actions.unsqueeze(1)).squeeze(1), entropy
        mean, log_std = out[:, : self.n], out[:, self.n :].clamp(LOG_STD_MIN, LOG_STD_MAX)
        z = (actions - mean) * torch.exp(-log_std)
        log_prob = (-0.5 * z.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)
        entropy = (log_std + 0.5 + _HALF_LOG_2PI).sum(-1)
        if self.squash == "tanh":
            log_half_range = self._log_half_range.to(out.dtype)
            log_prob = log_prob - log_tanh_jacobian(actions).sum(-1) - log_half_range
            u = mean + torch.exp(log_std) * z.detach()  # == actions, with a path to μ and σ
            entropy = entropy + log_tanh_jacobian(u).sum(-1) + log_half_range
        return log_prob, entropy

    @cached_property
    def _log_half_range(self) -> torch.Tensor:
        """Σ log((high - low)/2) over the action dimensions: the affine part of the squash's Jacobian."""
        high, low = torch.tensor(self.high, dtype=torch.float64), torch.tensor(self.low, dtype=torch.float64)
        half_range = (high - low) * 0.5
        return torch.log(half_range).sum()
