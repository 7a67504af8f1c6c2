"""The factorised action distributions of MultiDiscrete and MultiBinary action spaces, for ``ActionDist``.

- MultiDiscrete(nvec): one categorical per action dimension, over its own slice of the logits
  ([N, sum(nvec)], dimension k's nvec[k] logits after those of dimensions < k); the dimensions are
  independent, so log π(a) and the entropy are the sums over the dimensions (as SB3's
  MultiCategoricalDistribution).
- MultiBinary(n): n independent Bernoullis, one logit per bit (P(bit = 1) = sigmoid(logit)); log π and
  the entropy are sums over the bits (as SB3's BernoulliDistribution).

numpy for acting (samples by Gumbel-max per dimension, or logistic noise per bit), torch for the loss.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


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
