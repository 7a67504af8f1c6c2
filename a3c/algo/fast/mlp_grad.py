"""The actor-critic loss of a segment and its exact gradient for the tanh-MLP ``ActorCritic`` with a discrete
policy (categorical, one categorical per dimension, or Bernoulli bits), in numpy: the loss's derivative with
respect to the logits (``a3c.algo.fast.policy_grad``) and values in closed form, then the network's backward
(``a3c.algo.models.numpy_mlp``).

Why: for a model this small torch's autograd is all overhead — about 30 graph nodes at ~25 µs each made
forward + loss + backward of a 20-step segment cost ~1.5 ms, more than the 20 env steps it learns from. The
same math written out in numpy takes ~0.15 ms. It computes exactly what ``torch_update.segment_loss`` followed
by ``backward()`` computes (tests/algo/fast/test_mlp_grad.py checks every parameter's gradient against
autograd), and it writes the gradient into the model's flat gradient buffer, so clipping, the hand-off and the
shared optimizer's step are the same for both paths. Other models (Gaussian policies, conv nets) use autograd.

Shapes: N = T×B rows that learn; the forward also runs the extra bootstrap rows of ``segment_batch``.
"""

from __future__ import annotations

import numpy as np

from a3c.algo.fast.policy_grad import policy_terms
from a3c.algo.loss.losses import LossTerms
from a3c.algo.loss.segment import Segment, segment_batch, segment_targets
from a3c.algo.models.distributions import ActionDist
from a3c.algo.models.mlp_model import ActorCritic
from a3c.algo.models.numpy_mlp import NumpyMlp


class MlpGradient:
    """Loss terms and gradient of one segment for ``model``, whose parameters' ``.grad`` are views into
    its flat gradient buffer (``attach_flat_grad``); ``loss_and_grad`` overwrites that whole buffer.

    ``dist``: the action distribution, a discrete kind (default: categorical over the policy head's outputs);
    a Box one is a ValueError.
    """

    def __init__(self, model: ActorCritic, dist: ActionDist | None = None):
        self.dist = dist or ActionDist(False, model.policy_head.out_features)
        if self.dist.continuous:
            raise ValueError("MlpGradient takes discrete action spaces only; Box actions learn by autograd")
        self.mlp = NumpyMlp(model, grads=True)

    def loss_and_grad(
        self, seg: Segment, gamma: float, gae_lambda: float, value_coef: float, entropy_coef: float
    ) -> LossTerms:
        """policy-gradient loss + value_coef × MSE − entropy_coef × entropy of ``seg`` (means over its N
        samples) and its gradient, written into the flat gradient buffer. ``LossTerms.total`` is a float."""
        n = seg.rewards.size
        logits, values, cache = self.mlp.forward(segment_batch(seg), n)  # [N, P], [N + extra]
        advantages, returns = segment_targets(seg, values, gamma, gae_lambda)
        adv, ret, v = advantages.reshape(n), returns.reshape(n), values[:n]
        actions = seg.actions.reshape(n, *seg.actions.shape[2:])
        policy_loss, entropy, d_logits = policy_terms(self.dist, logits, actions, adv, entropy_coef)
        error = v - ret  # [N], the critic's residual (negated): its loss, gradient and variance
        value_loss = float(np.mean(error**2))
        d_values = (2.0 * value_coef / n) * error[:, None]  # [N, 1]
        self.mlp.backward(cache, d_logits, d_values)

        return LossTerms(
            total=policy_loss + value_coef * value_loss - entropy_coef * entropy,
            policy=policy_loss,
            value=value_loss,
            entropy=entropy,
            return_var=float(ret.var()),
            residual_var=float(error.var()),
        )
