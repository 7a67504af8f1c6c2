"""The trainer's finite check on the Ray backend: it takes the backend's verdict on the global weights and
copies the full state only for checkpoints. No Ray cluster: the driver's side is a stand-in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.learner import build_model
from a3c.algo.optim import flatten_parameters
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c_envs import inspect_env
from tests.support.extras import require_extra

require_extra("ray", "ray")

from a3c.backends.ray.backend import RayBackend  # noqa: E402 - after the extra's guard
from a3c.training.train import Trainer  # noqa: E402


def test_the_driver_counts_the_non_finite_global_weights_it_reads_from_the_shards():
    config = Config(env_id="CartPole-v1", workers=2)
    run = object.__new__(RayBackend)  # what non_finite_counts reads: a scratch model and the shards' weights
    run.scratch = build_model(config, Spaces((4,), 2))
    run.scratch_flat = flatten_parameters(run.scratch)
    weights = np.zeros(run.scratch_flat.numel(), np.float32)
    run._weights = lambda: weights
    assert run.non_finite_counts() == {}
    weights[:3] = [float("nan"), float("inf"), 1.0]  # the first parameter's first values
    name = next(iter(run.scratch.named_parameters()))[0]
    assert run.non_finite_counts() == {name: 2}


class StandInRayBackend:
    """The driver's view of global weights that went non-finite; copying the whole state is an error here."""

    def non_finite_counts(self) -> dict[str, int]:
        return {"body.0.weight": 2}

    def sync(self) -> None:
        raise AssertionError("the finite check copied the whole state")


def test_the_trainers_finite_check_on_ray_takes_the_verdict_not_the_state(tmp_path):
    info = inspect_env("CartPole-v1")
    config = Config(env_id="CartPole-v1", workers=1, backend="ray").validate()
    trainer = Trainer(config, info, tmp_path / "run", show_progress=False)
    trainer.backend = StandInRayBackend()
    trainer._check_finite()
    assert not trainer.params_finite
    (error,) = trainer.monitor.errors
    assert "body.0.weight (2 values)" in error.traceback
    trainer.monitor.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_checkpoint_still_refuses_non_finite_weights_from_the_backend(tmp_path, bad):
    # The once-a-second check no longer sees the weights on the driver: the checkpoint's own look at what
    # it saves must still keep a non-finite state out of last.pt.
    info = inspect_env("CartPole-v1")
    config = Config(env_id="CartPole-v1", workers=1, backend="ray").validate()
    trainer = Trainer(config, info, tmp_path / "run", show_progress=False)

    class Synced(StandInRayBackend):
        def sync(self) -> None:
            with torch.no_grad():
                next(trainer.model.parameters()).view(-1)[0] = bad

    trainer.backend = Synced()
    trainer._save_last()
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()
    assert not trainer.params_finite
    trainer.monitor.close()
