"""The actor-critic loss of a segment and its exact gradient for the categorical tanh-MLP ``ActorCritic``,
in numpy: the loss's derivative with respect to the logits and values in closed form, then the network's
backward (``a3c.algo.mlp``).

Why: for a model this small torch's autograd is all overhead — about 30 graph nodes at ~25 µs each made
forward + loss + backward of a 20-step segment cost ~1.5 ms, more than the 20 env steps it learns from. The
same math written out in numpy takes ~0.15 ms. It computes exactly what ``update.segment_loss`` followed by
``backward()`` computes (tests/algo/test_mlp_grad.py checks every parameter's gradient against autograd),
and it writes the gradient into the model's flat gradient buffer, so clipping, the hand-off and the shared
optimizer's step are the same for both paths. Other models (Gaussian policies, conv nets) use autograd.

Shapes: N = T×B rows that learn; the forward also runs the extra bootstrap rows of ``segment_batch``.
"""

from __future__ import annotations

import numpy as np

from a3c.algo.losses import LossTerms
from a3c.algo.mlp import NumpyMlp
from a3c.algo.model import ActorCritic
from a3c.algo.segment import Segment, segment_batch, segment_targets


class MlpGradient:
    """Loss terms and gradient of one segment for ``model``, whose parameters' ``.grad`` are views into
    its flat gradient buffer (``attach_flat_grad``); ``loss_and_grad`` overwrites that whole buffer."""

    def __init__(self, model: ActorCritic):
        self.mlp = NumpyMlp(model, grads=True)

    def loss_and_grad(
        self, seg: Segment, gamma: float, gae_lambda: float, value_coef: float, entropy_coef: float
    ) -> LossTerms:
        """policy-gradient loss + value_coef × MSE − entropy_coef × entropy of ``seg`` (means over its N
        samples) and its gradient, written into the flat gradient buffer. ``LossTerms.total`` is a float."""
        n = seg.rewards.size
        logits, values, cache = self.mlp.forward(segment_batch(seg), n)  # [N, A], [N + extra]
        advantages, returns = segment_targets(seg, values, gamma, gae_lambda)
        adv, ret, v = advantages.reshape(n), returns.reshape(n), values[:n]

        shifted = logits - logits.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        p = np.exp(log_p)
        rows = np.arange(n)
        actions = seg.actions.reshape(n)
        row_entropy = -(p * log_p).sum(axis=1)  # [N]

        policy_loss = -float(np.mean(log_p[rows, actions] * adv))
        value_loss = float(np.mean((v - ret) ** 2))
        entropy = float(row_entropy.mean())

        # d/dlogits of −mean(log p[a]·A) is (p − onehot(a))·A / n; of −c·mean(H) it is c·p·(log p + H) / n.
        d_logits = p * adv[:, None]
        d_logits[rows, actions] -= adv
        d_logits += entropy_coef * p * (log_p + row_entropy[:, None])
        d_logits /= n
        d_values = (2.0 * value_coef / n) * (v - ret)[:, None]  # [N, 1]
        self.mlp.backward(cache, d_logits, d_values)

        var = float(ret.var())
        explained = float("nan") if var == 0.0 else 1.0 - float((ret - v).var()) / var
        return LossTerms(
            total=policy_loss + value_coef * value_loss - entropy_coef * entropy,
            policy=policy_loss,
            value=value_loss,
            entropy=entropy,
            explained_variance=explained,
        )
