"""The policy terms of the actor-critic loss and their derivative with respect to the policy head's output,
in closed form (numpy), for the discrete action distributions: categorical, one categorical per dimension
(MultiDiscrete) and independent Bernoullis (MultiBinary). ``a3c.algo.fast.mlp_grad`` back-propagates the
derivative through the numpy MLP.

Each returns (policy loss, mean entropy, d out) for the loss -mean(log π(a|s)·A) - c·mean(H(π(·|s))) over the
N samples: ``out`` [N, P] the policy head's output, ``adv`` [N] the advantages, ``entropy_coef`` c, and
d out [N, P] = d loss / d out. tests/algo/fast/test_mlp_grad*.py check them against torch autograd.
"""

from __future__ import annotations

import numpy as np

from a3c.algo.models.distributions import ActionDist

PolicyTerms = tuple[float, float, np.ndarray]


def categorical_terms(
    logits: np.ndarray, actions: np.ndarray, adv: np.ndarray, entropy_coef: float
) -> PolicyTerms:
    """A categorical policy: ``logits`` [N, A], ``actions`` [N] int64."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    rows = np.arange(n)
    row_entropy = -(p * log_p).sum(axis=1)  # [N]
    policy_loss = -float(np.mean(log_p[rows, actions] * adv))
    # d/dlogits of −mean(log p[a]·A) is (p − onehot(a))·A / n; of −c·mean(H) it is c·p·(log p + H) / n.
    d_logits = p * adv[:, None]
    d_logits[rows, actions] -= adv
    d_logits += entropy_coef * p * (log_p + row_entropy[:, None])
    d_logits /= n
    return policy_loss, float(row_entropy.mean()), d_logits


def multi_categorical_terms(
    logits: np.ndarray, actions: np.ndarray, adv: np.ndarray, entropy_coef: float, nvec: tuple[int, ...]
) -> PolicyTerms:
    """One categorical per dimension: ``logits`` [N, sum(nvec)], ``actions`` [N, D] int64. log π and H are
    sums over the dimensions, so the loss, the entropy and each dimension's slice of d out are the
    categorical ones of that dimension (summed)."""
    policy_loss, entropy = 0.0, 0.0
    d_logits = np.empty_like(logits)
    start = 0
    for k, size in enumerate(nvec):
        part = slice(start, start + size)
        loss_k, entropy_k, d_logits[:, part] = categorical_terms(
            logits[:, part], actions[:, k], adv, entropy_coef
        )
        policy_loss, entropy, start = policy_loss + loss_k, entropy + entropy_k, start + size
    return policy_loss, entropy, d_logits


def bernoulli_terms(
    logits: np.ndarray, bits: np.ndarray, adv: np.ndarray, entropy_coef: float
) -> PolicyTerms:
    """Independent Bernoullis: ``logits`` [N, n], ``bits`` [N, n] (0/1).

    Per bit, with p = sigmoid(l): log P(b) = b·l − softplus(l), so d/dl = b − p; H = softplus(l) − l·p, so
    dH/dl = −l·p(1 − p).
    """
    n = logits.shape[0]
    b = bits.astype(logits.dtype)
    p = 0.5 * (1.0 + np.tanh(0.5 * logits))  # sigmoid, without exp's overflow for very negative logits
    softplus = np.logaddexp(0.0, logits)
    log_prob = (b * logits - softplus).sum(axis=1)  # [N]
    row_entropy = (softplus - logits * p).sum(axis=1)  # [N]
    policy_loss = -float(np.mean(log_prob * adv))
    d_logits = ((p - b) * adv[:, None] + entropy_coef * logits * p * (1.0 - p)) / n
    return policy_loss, float(row_entropy.mean()), d_logits


def policy_terms(
    dist: ActionDist, out: np.ndarray, actions: np.ndarray, adv: np.ndarray, entropy_coef: float
) -> PolicyTerms:
    """The terms of ``dist``'s kind (Discrete, MultiDiscrete or MultiBinary; ValueError for Box, which has
    no closed form here and learns by autograd)."""
    if dist.continuous:
        raise ValueError("the closed-form gradient covers discrete action spaces only; Box uses autograd")
    if dist.nvec:
        return multi_categorical_terms(out, actions, adv, entropy_coef, dist.nvec)
    if dist.binary:
        return bernoulli_terms(out, actions, adv, entropy_coef)
    return categorical_terms(out, actions, adv, entropy_coef)
