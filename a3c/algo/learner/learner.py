"""The A3C learner of one worker: pull shared weights → roll out → loss → gradients → shared step.

No processes and no files here: a spawned worker and the in-process serial mode run this same code.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from a3c.algo.fast.mlp_grad import MlpGradient
from a3c.algo.learner.rollout import Episode, ObsNormalizer, RolloutCollector, action_dist
from a3c.algo.learner.schedule import scheduled_lr
from a3c.algo.learner.torch_update import compute_gradients, hand_off_gradients, pull_weights, segment_loss
from a3c.algo.models.conv_model import ConvActorCritic
from a3c.algo.models.mlp_model import ActorCritic
from a3c.algo.models.policy import make_policy
from a3c.algo.shared.flat import (
    GradViewGuard,
    attach_flat_grad,
    clip_flat_grad,
    flat_view,
    flatten_parameters,
)
from a3c.algo.shared.normalize import RewardScaler, SharedObsStats
from a3c.algo.shared.optim import SharedOptimizer, make_optimizer
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from envs import make_vector_env


def build_model(config: Config, spaces: Spaces) -> nn.Module:
    """The actor-critic network that ``config`` describes for an env's ``spaces``: ``ActorCritic`` (an MLP)
    or ``ConvActorCritic`` (the A3C paper's conv net, with an LSTM when ``lstm_size``)."""
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
    )


def build_shared(config: Config, spaces: Spaces) -> tuple[nn.Module, SharedOptimizer]:
    """The global model, its parameters views into one flat buffer in shared memory, and the shared
    optimizer that steps that one buffer (its state created eagerly, in shared memory, by the optimizer)."""
    model = build_model(config, spaces)
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
        # MultiBinary); everything else takes autograd.
        closed_form = isinstance(self.local_model, ActorCritic) and not self.dist.continuous
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

        The files it runs through (under a3c/algo/), each once, in the order the update first reaches them
        (the numpy path's order in step 3; ``__init__`` set up the flat buffers, ``shared/flat.py``):
        - ``learner/torch_update.py``: ``pull_weights`` (1); ``segment_loss`` → ``compute_gradients`` (3,
          autograd); ``hand_off_gradients`` (5);
        - ``learner/rollout.py``: ``RolloutCollector.collect`` (2);
        - ``models/policy.py``: how the model acts (2): through ``models/numpy_mlp.py``'s
          ``NumpyMlp.policy_output`` for an MLP, else the torch model (``models/mlp_model.py``,
          ``models/conv_model.py``, whose ``forward`` is also step 3's autograd forward);
        - ``models/distributions.py``: the sampled actions (2); log-probs and entropies (3, autograd);
        - ``loss/segment.py``: ``Segment`` (2); ``segment_batch`` (every observation of the update in one
          batch) and ``segment_targets`` (3);
        - ``fast/mlp_grad.py``: ``MlpGradient.loss_and_grad`` (3, numpy): ``segment_batch`` →
          ``NumpyMlp.forward`` → ``segment_targets`` → ``policy_terms`` → ``NumpyMlp.backward``;
        - ``loss/returns.py``: ``gae`` (3);
        - ``fast/policy_grad.py``: ``policy_terms`` (3, numpy);
        - ``loss/losses.py``: ``a2c_loss`` (3, autograd);
        - ``shared/flat.py``: ``clip_flat_grad`` (3), ``GradViewGuard.check`` (4);
        - ``learner/schedule.py``: ``scheduled_lr`` (5);
        - ``shared/optim.py``: ``SharedAdam.step`` (or ``SharedRMSprop``) (5).
        ``reference.py`` is step 3 (discrete actions) in one function of plain autograd;
        tests/algo/test_reference.py checks both of step 3's paths against it."""
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
                    cfg.lr, cfg.lr_schedule, pulled_steps, cfg.max_steps, pulled_seconds, cfg.max_seconds
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
