"""The actor-critic loss of a segment and its exact gradient for the tanh-MLP ``ActorCritic``, in numpy.

Why: for a model this small torch's autograd is all overhead — about 30 graph nodes at ~25 µs each made
forward + loss + backward of a 20-step segment cost ~1.5 ms, more than the 20 env steps it learns from. The
same math written out in numpy takes ~0.15 ms. It computes exactly what ``update.segment_loss`` followed by
``backward()`` computes (tests/test_mlp_grad.py checks every parameter's gradient against autograd), and it
writes the gradient into the model's flat gradient buffer, so clipping, the hand-off and the shared
optimizer's step are the same for both paths. Other models (issue 4's Gaussian and conv nets) use autograd.

Shapes: N = T×B rows that learn; the forward also runs the extra bootstrap rows of ``segment_batch``.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from a3c.algo.losses import LossTerms
from a3c.algo.model import ActorCritic
from a3c.algo.rollout import Segment
from a3c.algo.update import segment_batch, segment_targets

# (weight [out, in], bias [out], weight grad, bias grad): numpy views of one nn.Linear's tensors.
_Layer = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _views(linear: nn.Linear) -> _Layer:
    if linear.weight.grad is None or linear.bias.grad is None:
        raise ValueError("attach the flat gradient buffer (flat.attach_flat_grad) before MlpGradient")
    return (
        linear.weight.detach().numpy(),
        linear.bias.detach().numpy(),
        linear.weight.grad.numpy(),
        linear.bias.grad.numpy(),
    )


def _linears(body: nn.Sequential) -> list[_Layer]:
    return [_views(m) for m in body if isinstance(m, nn.Linear)]


def _body_forward(x: np.ndarray, layers: list[_Layer]) -> list[np.ndarray]:
    """The input and every hidden activation tanh(x Wᵀ + b) of a body; [rows, width] each."""
    acts = [x]
    for w, b, _, _ in layers:
        acts.append(np.tanh(acts[-1] @ w.T + b))
    return acts


def _body_backward(acts: list[np.ndarray], layers: list[_Layer], d_out: np.ndarray, n: int) -> None:
    """Write the body's parameter gradients, given d loss / d (its last activation) [n, width]."""
    d = d_out
    for i in range(len(layers) - 1, -1, -1):
        w, _, gw, gb = layers[i]
        d = d * (1.0 - acts[i + 1][:n] ** 2)  # through tanh
        np.matmul(d.T, acts[i][:n], out=gw)
        np.sum(d, axis=0, out=gb)
        if i:
            d = d @ w


def _head_backward(layer: _Layer, features: np.ndarray, d_out: np.ndarray) -> np.ndarray:
    """Write the head's gradients for d loss / d (its output) [n, out]; return d loss / d features."""
    w, _, gw, gb = layer
    np.matmul(d_out.T, features, out=gw)
    np.sum(d_out, axis=0, out=gb)
    return d_out @ w


class MlpGradient:
    """Loss terms and gradient of one segment for ``model``, whose parameters' ``.grad`` are views into
    its flat gradient buffer (``attach_flat_grad``); ``loss_and_grad`` overwrites that whole buffer."""

    def __init__(self, model: ActorCritic):
        self.shared_body = model.shared_body
        self.policy_body = _linears(model.policy_body)
        self.value_body = self.policy_body if model.shared_body else _linears(model.value_body)
        self.policy_head = _views(model.policy_head)
        self.value_head = _views(model.value_head)

    def loss_and_grad(
        self, seg: Segment, gamma: float, gae_lambda: float, value_coef: float, entropy_coef: float
    ) -> LossTerms:
        """policy-gradient loss + value_coef × MSE − entropy_coef × entropy of ``seg`` (means over its N
        samples) and its gradient, written into the flat gradient buffer. ``LossTerms.total`` is a float."""
        batch = segment_batch(seg)
        n = seg.rewards.size
        p_acts = _body_forward(batch, self.policy_body)
        v_acts = p_acts if self.shared_body else _body_forward(batch, self.value_body)
        w, b, _, _ = self.value_head
        values = (v_acts[-1] @ w.T + b)[:, 0]  # [N + extra]
        advantages, returns = segment_targets(seg, values, gamma, gae_lambda)
        adv, ret, v = advantages.reshape(n), returns.reshape(n), values[:n]

        w, b, _, _ = self.policy_head
        logits = p_acts[-1][:n] @ w.T + b  # [n, A]
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        p = np.exp(log_p)
        rows = np.arange(n)
        actions = seg.actions.reshape(n)
        row_entropy = -(p * log_p).sum(axis=1)  # [n]

        policy_loss = -float(np.mean(log_p[rows, actions] * adv))
        value_loss = float(np.mean((v - ret) ** 2))
        entropy = float(row_entropy.mean())

        # d/dlogits of −mean(log p[a]·A) is (p − onehot(a))·A / n; of −c·mean(H) it is c·p·(log p + H) / n.
        d_logits = p * adv[:, None]
        d_logits[rows, actions] -= adv
        d_logits += entropy_coef * p * (log_p + row_entropy[:, None])
        d_logits /= n
        d_values = (2.0 * value_coef / n) * (v - ret)[:, None]  # [n, 1]

        d_policy_features = _head_backward(self.policy_head, p_acts[-1][:n], d_logits)
        d_value_features = _head_backward(self.value_head, v_acts[-1][:n], d_values)
        if self.shared_body:
            _body_backward(p_acts, self.policy_body, d_policy_features + d_value_features, n)
        else:
            _body_backward(p_acts, self.policy_body, d_policy_features, n)
            _body_backward(v_acts, self.value_body, d_value_features, n)

        var = float(ret.var())
        explained = float("nan") if var == 0.0 else 1.0 - float((ret - v).var()) / var
        return LossTerms(
            total=policy_loss + value_coef * value_loss - entropy_coef * entropy,
            policy=policy_loss,
            value=value_loss,
            entropy=entropy,
            explained_variance=explained,
        )
