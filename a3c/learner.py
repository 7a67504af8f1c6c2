"""The A3C learner of one worker: pull shared weights → roll out → loss → gradients → shared step.

No processes and no files here: a spawned worker and the in-process serial mode run this same code.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from a3c.config import Config
from a3c.model import ActorCritic
from a3c.rollout import Episode, RolloutCollector
from a3c.update import compute_gradients, hand_off_gradients, pull_weights, segment_loss
from envs import make_vector_env


def build_model(config: Config, obs_dim: int, n_actions: int) -> ActorCritic:
    """The actor-critic network that ``config`` describes."""
    return ActorCritic(obs_dim, n_actions, config.hidden_sizes, config.shared_body)


@dataclass(frozen=True)
class UpdateResult:
    """What one update did: env steps consumed, episodes that ended, loss parts and the gradient norm."""

    steps: int
    episodes: list[Episode]
    policy_loss: float
    value_loss: float
    entropy: float
    grad_norm: float
    explained_variance: float = float("nan")
    policy_lag: int = 0


class Learner:
    """One worker's learner over the shared model and shared optimizer.

    Args:
        config: the run's config.
        shared_model: the global model (its parameters in shared memory in the spawned case).
        optimizer: the shared optimizer over ``shared_model``'s parameters.
        seed: this worker's seed (envs get seed, seed+1, …; the action sampler and torch get it too).
        policy_version: the number of updates applied to the shared model so far (all workers); the policy
            lag of an update is how much it grew between this worker's weight pull and its own step.
    """

    def __init__(
        self,
        config: Config,
        shared_model: ActorCritic,
        optimizer: torch.optim.Optimizer,
        seed: int,
        policy_version: Callable[[], int] = lambda: 0,
    ):
        self.config = config
        self.policy_version = policy_version
        self.shared_model = shared_model
        self.optimizer = optimizer
        self.local_model = copy.deepcopy(shared_model)
        torch.manual_seed(seed)
        self.collector = RolloutCollector(
            make_vector_env(config.env_id, config.envs_per_worker), config.t_max, seed
        )

    def update(self) -> UpdateResult:
        """Run one full update and return what it did (a non-finite grad_norm: the step was skipped)."""
        cfg = self.config
        pull_weights(self.local_model, self.shared_model)
        pulled_version = self.policy_version()
        segment, episodes = self.collector.collect(self.local_model)
        loss = segment_loss(
            self.local_model, segment, cfg.gamma, cfg.gae_lambda, cfg.value_coef, cfg.entropy_coef
        )
        grad_norm = compute_gradients(self.local_model, loss.total, cfg.max_grad_norm)
        # One NaN/inf gradient would poison the shared weights and moments of every worker: skip that step.
        if math.isfinite(grad_norm):
            hand_off_gradients(self.local_model, self.shared_model)
            self.optimizer.step()
        return UpdateResult(
            cfg.steps_per_update,
            episodes,
            loss.policy,
            loss.value,
            loss.entropy,
            grad_norm,
            loss.explained_variance,
            self.policy_version() - pulled_version,
        )

    def close(self) -> None:
        self.collector.envs.close()
