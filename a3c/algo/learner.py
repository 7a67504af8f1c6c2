"""One worker's A3C learner: pull the shared weights → roll out → loss and gradient → hand off → shared step
(``Learner.update``), and what it is built from: the model a config describes (``build_model``), the global
model and its shared optimizer (``build_shared``).

No processes and no files here: a spawned worker, the serial backend and a Ray node group run this same code.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from a3c.algo.distributions import action_dist
from a3c.algo.loss import compute_gradients, segment_loss
from a3c.algo.networks import ActorCritic, ConvActorCritic
from a3c.algo.normalize import RewardScaler, SharedObsStats
from a3c.algo.numpy_mlp import MlpGradient, make_policy
from a3c.algo.optim import (
    GradViewGuard,
    SharedOptimizer,
    attach_flat_grad,
    clip_flat_grad,
    flat_view,
    flatten_parameters,
    make_optimizer,
    scheduled_lr,
)
from a3c.algo.rollout import Episode, ObsNormalizer, RolloutCollector
from a3c.algo.user_model import build_user_model
from a3c.core.config import BUILTIN_MODELS, Config
from a3c.core.devices import resolve_device
from a3c.core.spaces import Spaces
from a3c_envs import make_vector_env


def build_model(config: Config, spaces: Spaces) -> nn.Module:
    """The actor-critic network that ``config`` describes for an env's ``spaces``: ``ActorCritic`` (an MLP),
    ``ConvActorCritic`` (the A3C paper's conv net, with an LSTM when ``lstm_size``), or the user's network
    (``model`` a reference to its builder: ``a3c.algo.user_model``, built and checked on a sample batch;
    BadInput in one line when it does not fit)."""
    if config.model not in BUILTIN_MODELS:
        return build_user_model(config.model, spaces)
    if config.model == "cnn":
        return ConvActorCritic(
            spaces.obs_shape,
            spaces.n_actions,
            lstm_size=config.lstm_size,
            continuous=spaces.continuous,
            init_log_std=config.init_log_std,
        )
    return ActorCritic(
        spaces.obs_dim,
        spaces.n_actions,
        hidden_sizes=config.hidden_sizes,
        shared_body=config.shared_body,
        continuous=spaces.continuous,
        state_std=config.gaussian_std == "state",
        init_log_std=config.init_log_std,
        activation=config.activation,
    )


def build_shared(
    config: Config, spaces: Spaces, device: torch.device | None = None
) -> tuple[nn.Module, SharedOptimizer]:
    """The global model, its parameters views into one flat buffer in shared memory, and the shared
    optimizer that steps that one buffer (its state created eagerly, in shared memory, by the optimizer).

    All of it on ``device`` (default: the config's, ``resolve_device``). On a GPU the buffer and the moments
    are CUDA tensors: torch.multiprocessing shares them with spawned and forkserver children by CUDA IPC
    (``share_memory_`` is for CPU tensors), as long as this process keeps them alive (docs/gpu.md)."""
    device = device or resolve_device(config.device, config.model, config.backend)
    model = build_model(config, spaces).to(device)
    flat = flatten_parameters(model, shared=True)
    return model, make_optimizer(config.optimizer, [flat], config.lr, config.optimizer_eps)


@dataclass(frozen=True, kw_only=True)
class UpdateResult:
    """What one update did: env steps consumed, episodes that ended, loss parts and the gradient norm; the
    variances of the returns and of the critic's residuals over its samples (for the explained variance)."""

    steps: int
    episodes: list[Episode]
    policy_loss: float
    value_loss: float
    entropy: float
    grad_norm: float
    return_var: float = float("nan")
    residual_var: float = float("nan")
    policy_lag: int = 0


class Learner:
    """One worker's learner over the shared model and shared optimizer.

    Args:
        config: the run's config.
        shared_model: the global model (its parameters in shared memory in the spawned case).
        optimizer: the shared optimizer over ``shared_model``'s parameters.
        seed: this worker's seed (envs get seed, seed+1, …; the action sampler and torch get it too).
        clock: the run so far, all workers: (updates applied to the shared model, env steps, seconds of the
            run's wall time, continued across a resume). The policy lag of an update is how much the updates
            grew between this worker's weight pull and its own step; the learning-rate schedule reads the
            steps and the seconds.
        normalizer: the observation normaliser (``config.obs_norm``), feeding and reading the shared stats.
        reward_stats: this worker's writer of the run's return statistics (``config.reward_scale``): in
            shared memory (on Ray, its node group's, merged across nodes by the driver); None: off.
    """

    def __init__(
        self,
        config: Config,
        shared_model: nn.Module,
        optimizer: SharedOptimizer,
        *,
        seed: int,
        clock: Callable[[], tuple[int, int, float]] = lambda: (0, 0, 0.0),
        normalizer: ObsNormalizer | None = None,
        reward_stats: ObsNormalizer | None = None,
    ):
        self.config = config
        self.clock = clock
        self.shared_model = shared_model
        self.optimizer = optimizer
        # The shared model's parameters are views into one flat shared buffer, and the optimizer's only
        # parameter is a tensor over that same memory: the gradient must be handed to THAT tensor object.
        stepped = [p for group in optimizer.param_groups for p in group["params"]]
        if len(stepped) != 1 or stepped[0].data_ptr() != flat_view(shared_model).data_ptr():
            raise ValueError("the optimizer must step the shared model's flat buffer (build_shared)")
        self.shared_flat = stepped[0]
        self.device = self.shared_flat.device  # the shared model's: the local copy, the batches, the step
        self.local_model = copy.deepcopy(shared_model)
        self.local_flat = flatten_parameters(self.local_model)
        self.local_grad = attach_flat_grad(self.local_model, self.local_flat)
        self.grad_guard = GradViewGuard(self.local_model, self.local_grad)
        torch.manual_seed(seed)
        envs = make_vector_env(
            config.env_id,
            config.envs_per_worker,
            training=True,
            frame_stack=config.frame_stack,
            wrappers=config.wrappers,
            **config.env_kwargs,
        )
        self.dist = action_dist(envs.single_action_space, config.squash, config.mean_l2_coef)
        reward_scale = None
        if config.reward_scale:
            stats = reward_stats or SharedObsStats((), 1, shared=False).writer(0)
            reward_scale = RewardScaler(envs.num_envs, config.gamma, stats)
        self.collector = RolloutCollector(envs, config.t_max, seed, self.dist, normalizer, reward_scale)
        self.policy = make_policy(self.local_model, envs.num_envs)
        # The closed-form numpy gradient covers the MLP with discrete actions (categorical, MultiDiscrete,
        # MultiBinary) on the CPU; everything else takes autograd.
        closed_form = isinstance(self.local_model, ActorCritic) and not self.dist.continuous
        closed_form = closed_form and self.device.type == "cpu"
        use_numpy = config.numpy_grad and closed_form
        self.numpy_grad = MlpGradient(self.local_model, self.dist) if use_numpy else None

    def update(self) -> UpdateResult:
        """Run one full update and return what it did (a non-finite grad_norm: the step was skipped).

        One update, in five steps:
        1. pull the shared flat weights into this worker's local flat buffer;
        2. roll out t_max steps of the worker's envs into a ``Segment`` [t_max, envs, ...], acting with the
           model's numpy twin (an MLP) or torch (with a carried LSTM state);
        3. the loss and its gradient, into the local flat gradient buffer: the numpy closed form for the MLP
           with discrete actions (``numpy_grad``), autograd otherwise; then clip its norm;
        4. check every parameter's ``.grad`` still views that buffer (invariant 2);
        5. hand the gradient to the shared flat parameter, set the scheduled lr, step the shared optimizer
           (lock-free, on the shared buffer and its shared moments).

        docs/how-it-works.md follows this update module by module; ``a3c.algo.reference`` is step 3 in
        plain autograd, every head and the LSTM; tests/algo/test_reference.py checks both paths against it."""
        cfg = self.config
        pull_weights(self.local_flat, self.shared_flat)
        pulled_version, pulled_steps, pulled_seconds = self.clock()
        segment, episodes = self.collector.collect(self.policy)
        loss_args = (segment, cfg.gamma, cfg.gae_lambda, cfg.value_coef, cfg.entropy_coef)
        if self.numpy_grad is not None:
            loss = self.numpy_grad.loss_and_grad(*loss_args)
            grad_norm = clip_flat_grad(self.local_grad, cfg.max_grad_norm)
        else:
            loss = segment_loss(self.local_model, *loss_args, self.dist)
            grad_norm = compute_gradients(loss.total, self.local_grad, cfg.max_grad_norm)
        self.grad_guard.check()  # invariant 2: the gradient handed off is this update's
        # One NaN/inf gradient would poison the shared weights and moments of every worker: skip that step.
        if math.isfinite(grad_norm):
            hand_off_gradients(self.local_grad, self.shared_flat)
            if cfg.lr_schedule != "constant":  # where the run was at this update's pull: all workers' steps
                lr = scheduled_lr(
                    cfg.lr,
                    cfg.lr_schedule,
                    pulled_steps,
                    cfg.max_steps,
                    pulled_seconds,
                    cfg.max_seconds,
                    cfg.lr_decay_start,
                )
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
            self.optimizer.step()
        return UpdateResult(
            steps=cfg.steps_per_update,
            episodes=episodes,
            policy_loss=loss.policy,
            value_loss=loss.value,
            entropy=loss.entropy,
            grad_norm=grad_norm,
            return_var=loss.return_var,
            residual_var=loss.residual_var,
            policy_lag=self.clock()[0] - pulled_version,
        )

    def close(self) -> None:
        """Close this learner's envs."""
        self.collector.envs.close()


def hand_off_gradients(flat_grad: torch.Tensor, shared_flat: torch.Tensor) -> None:
    """Point the shared flat parameter's ``.grad`` at this update's local gradient, before each step.

    Done on every update. The popular "alias once if shared.grad is None" trick breaks on PyTorch 2.x:
    ``zero_grad`` sets local grads to None, so the shared side keeps the first (stale) gradient forever,
    or, without set_to_none, a running sum of all of them. Here the local gradient is one buffer zeroed in
    place, and the hand-off is explicit each time anyway.
    """
    shared_flat.grad = flat_grad


@torch.no_grad()
def pull_weights(local_flat: torch.Tensor, shared_flat: torch.Tensor) -> None:
    """Copy the shared parameters into the local model's flat buffer, in place (one op)."""
    local_flat.copy_(shared_flat)
