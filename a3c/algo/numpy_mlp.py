"""The MLP's numpy twin: ONE forward of the ``ActorCritic`` (``a3c.algo.networks``; tanh or relu hidden
layers), used two ways — by the rollout policy (``NumpyMlp.policy_output``: no cache) and by the
closed-form update (``MlpGradient.loss_and_grad``: the forward keeps every activation, the policy terms'
derivative comes in closed form, ``policy_terms``, and ``NumpyMlp.backward`` writes the exact parameter
gradients into the model's flat gradient buffer). It covers discrete policies: categorical, one
categorical per dimension (MultiDiscrete) and independent Bernoullis (MultiBinary); Box actions, conv nets
and the user's networks learn by autograd.

Why numpy: torch costs ~5 µs per op on tensors this small, so the torch modules take ~60 µs for a batch of
1–16 observations that numpy does in ~8 µs, and autograd's ~30 graph nodes at ~25 µs each made forward + loss
+ backward of a 20-step segment cost ~1.5 ms, more than the 20 env steps it learns from; the same math here
takes ~0.15 ms. It computes exactly what ``a3c.algo.loss.segment_loss`` followed by ``backward()`` computes
(tests/algo/test_mlp_grad.py checks every parameter's gradient against autograd), and it writes the gradient
into the flat buffer, so clipping, the hand-off and the shared step are the same for both paths.

Every array here is a numpy VIEW of a model tensor, made once: a weight pull (in place) is seen at once;
parameters re-seated by ``flatten_parameters`` need a new ``NumpyMlp``. All float32, like the model.

Shapes: rows = observations in a batch; in, out = a layer's widths; A = policy-head outputs; P = policy
outputs (A, or 2A with a learned log σ); N = T×B rows that learn (the forward also runs the extra bootstrap
rows of ``segment_batch``). Each ``*_terms`` returns (policy loss, mean entropy, d out) for the loss
-mean(log π(a|s)·A) - c·mean(H(π(·|s))) over the N samples: ``out`` [N, P] the policy head's output, ``adv``
[N] the advantages, ``entropy_coef`` c, and d out [N, P] = d loss / d out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from torch import nn

from a3c.algo.distributions import ActionDist
from a3c.algo.loss import LossTerms
from a3c.algo.networks import ActorCritic, TorchPolicy
from a3c.algo.rollout import Segment, segment_batch, segment_targets
from a3c.core.devices import model_device

# (weight transposed [in, out], bias [out]): numpy views of one nn.Linear's parameters.
Dense = tuple[np.ndarray, np.ndarray]
# (weight gradient [out, in], bias gradient [out]): numpy views of that layer's ``.grad``.
DenseGrad = tuple[np.ndarray, np.ndarray]


def dense_views(linear: nn.Linear) -> Dense:
    """Views of ``linear``'s weight, transposed to [in, out] (what ``np.dot`` takes), and bias [out]."""
    return linear.weight.detach().numpy().T, linear.bias.detach().numpy()


def dense_grad_views(linear: nn.Linear) -> DenseGrad:
    """Views of ``linear``'s weight gradient [out, in] and bias gradient [out]; ValueError if it has none."""
    if linear.weight.grad is None or linear.bias.grad is None:
        raise ValueError("attach the flat gradient buffer (flat.attach_flat_grad) before MlpGradient")
    return linear.weight.grad.numpy(), linear.bias.grad.numpy()


def body_linears(body: nn.Sequential) -> list[nn.Linear]:
    """The Linear layers of an MLP body (``networks._mlp``), input first."""
    return [m for m in body if isinstance(m, nn.Linear)]


def relu(z: np.ndarray) -> np.ndarray:
    """max(z, 0) elementwise, in place: ``z`` is a fresh pre-activation nothing else holds."""
    return np.maximum(z, 0.0, out=z)


# Each activation of ``networks.ACTIVATIONS`` and its derivative written in terms of its OUTPUT y (all the
# backward keeps): tanh' = 1 - y², relu' = [y > 0] (0 at 0, as torch's ReLU backward).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"tanh": np.tanh, "relu": relu}
DERIVATIVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": lambda y: 1.0 - y**2,
    "relu": lambda y: (y > 0).astype(y.dtype),
}


def body_forward(
    x: np.ndarray, body: list[Dense], acts: list[np.ndarray] | None = None, activation: str = "tanh"
) -> np.ndarray:
    """x [rows, in] → the body's last activation [rows, width], each layer f(x W + b), f the ``activation``.

    ``acts``: when given, every activation after ``x`` is appended to it (the cache ``body_backward`` needs).
    """
    f = ACTIVATIONS[activation]
    for w_t, b in body:
        x = f(np.dot(x, w_t) + b)  # np.dot: half the call overhead of @ on tiny arrays, same numbers
        if acts is not None:
            acts.append(x)
    return x


def dense_forward(x: np.ndarray, layer: Dense) -> np.ndarray:
    """A linear head: x [rows, in] → x W + b [rows, out]."""
    w_t, b = layer
    return np.dot(x, w_t) + b


def body_backward(
    acts: list[np.ndarray],
    body: list[Dense],
    grads: list[DenseGrad],
    d_out: np.ndarray,
    n: int,
    activation: str = "tanh",
) -> None:
    """Write the body's parameter gradients into ``grads`` (overwriting them).

    Args:
        acts: the body's input and every activation of ``body_forward`` [rows, width]; only the first ``n``
            rows learn.
        body, grads: the body's layers and their gradient views.
        d_out: d loss / d (the last activation) [n, width].
        n: the rows that learn.
        activation: the body's activation (``ACTIVATIONS``).
    """
    derivative = DERIVATIVES[activation]
    d = d_out
    for i in range(len(body) - 1, -1, -1):
        w_t = body[i][0]
        gw, gb = grads[i]
        d = d * derivative(acts[i + 1][:n])  # through the activation
        np.matmul(d.T, acts[i][:n], out=gw)
        np.sum(d, axis=0, out=gb)
        if i:
            d = d @ w_t.T


def dense_backward(layer: Dense, grad: DenseGrad, x: np.ndarray, d_out: np.ndarray) -> np.ndarray:
    """Write a head's gradients for d loss / d (its output) [n, out] at inputs ``x`` [n, in] into ``grad``;
    return d loss / d x [n, in]."""
    gw, gb = grad
    np.matmul(d_out.T, x, out=gw)
    np.sum(d_out, axis=0, out=gb)
    return d_out @ layer[0].T


class MlpCache(NamedTuple):
    """What ``NumpyMlp.backward`` needs of a ``forward``: each body's input and activations [rows, width]
    (one list for both when the body is shared) and the rows that learn."""

    policy_acts: list[np.ndarray]
    value_acts: list[np.ndarray]
    n: int


class NumpyMlp:
    """numpy views of an ``ActorCritic``'s parameters (and, with ``grads``, of its flat gradient buffer,
    ``flat.attach_flat_grad``) and the one forward over them.

    Args:
        model: the MLP actor-critic (its ``activation``: tanh or relu).
        grads: also view the parameters' ``.grad`` (for ``backward``); ValueError if they are not attached.
    """

    def __init__(self, model: ActorCritic, grads: bool = False):
        self.shared_body = model.shared_body
        self.activation = model.activation
        policy_linears = body_linears(model.policy_body)
        value_linears = policy_linears if model.shared_body else body_linears(model.value_body)
        self.policy_body = [dense_views(m) for m in policy_linears]
        self.value_body = self.policy_body if model.shared_body else [dense_views(m) for m in value_linears]
        self.policy_head = dense_views(model.policy_head)
        self.value_head = dense_views(model.value_head)
        self.log_std = None if model.log_std is None else model.log_std.detach().numpy()
        if grads:
            self.policy_body_grads = [dense_grad_views(m) for m in policy_linears]
            self.value_body_grads = (
                self.policy_body_grads if model.shared_body else [dense_grad_views(m) for m in value_linears]
            )
            self.policy_head_grad = dense_grad_views(model.policy_head)
            self.value_head_grad = dense_grad_views(model.value_head)

    def policy_output(self, obs: np.ndarray) -> np.ndarray:
        """The rollout's forward: observations [B, obs_dim] float32 → the policy output [B, P] (logits, or a
        Gaussian's mean and log σ), the numbers ``ActorCritic.forward`` gives. Reads no value body."""
        out = dense_forward(body_forward(obs, self.policy_body, activation=self.activation), self.policy_head)
        if self.log_std is not None:
            out = np.concatenate([out, np.broadcast_to(self.log_std, out.shape)], axis=-1)
        return out

    def forward(self, x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, MlpCache]:
        """The update's forward, kept for ``backward``: x [rows, obs_dim] → (policy-head output of the first
        ``n`` rows [n, A], values of all rows [rows], cache). The policy head runs on the learning rows
        only; the values of the other rows are bootstrap values."""
        policy_acts = [x]
        features = body_forward(x, self.policy_body, policy_acts, self.activation)
        value_acts = policy_acts
        if not self.shared_body:
            value_acts = [x]
            body_forward(x, self.value_body, value_acts, self.activation)
        values = dense_forward(value_acts[-1], self.value_head)[:, 0]
        head_out = dense_forward(features[:n], self.policy_head)
        return head_out, values, MlpCache(policy_acts, value_acts, n)

    def backward(self, cache: MlpCache, d_head_out: np.ndarray, d_values: np.ndarray) -> None:
        """Write every parameter's gradient (overwriting the flat gradient buffer) from d loss / d (the
        policy-head output) [n, A] and d loss / d values [n, 1] of the cache's n learning rows.
        Needs ``grads=True``."""
        n = cache.n
        d_policy = dense_backward(
            self.policy_head, self.policy_head_grad, cache.policy_acts[-1][:n], d_head_out
        )
        d_value = dense_backward(self.value_head, self.value_head_grad, cache.value_acts[-1][:n], d_values)
        f = self.activation
        if self.shared_body:
            body_backward(
                cache.policy_acts, self.policy_body, self.policy_body_grads, d_policy + d_value, n, f
            )
        else:
            body_backward(cache.policy_acts, self.policy_body, self.policy_body_grads, d_policy, n, f)
            body_backward(cache.value_acts, self.value_body, self.value_body_grads, d_value, n, f)


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


def make_policy(model: nn.Module, num_envs: int) -> Callable[[np.ndarray], np.ndarray]:
    """The fastest way ``model`` acts for ``num_envs`` envs at once, observations [B, ...] → policy outputs
    [B, P] as numpy, no gradient: an MLP through its numpy twin (``NumpyMlp.policy_output``, ~8 µs a step),
    any other model (conv nets, LSTMs), and an MLP on a GPU, through torch (``TorchPolicy``, which carries a
    recurrent state)."""
    if isinstance(model, ActorCritic) and model_device(model).type == "cpu":
        return NumpyMlp(model).policy_output
    return TorchPolicy(model, num_envs)
