"""The Ray backend's finite check: the server counts non-finite weights and the driver
receives only that verdict; the full state crosses only for checkpoints. No Ray cluster: the server class
runs in this process and the driver's side gets a stand-in."""

from __future__ import annotations

import pytest
import torch

from a3c.algo.learner.learner import build_shared
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from envs import inspect_env
from tests.helpers import require_extra

require_extra("ray", "ray")

from a3c.backends.ray.driver import ParameterServer  # noqa: E402 - after the extra's guard
from a3c.training.train import Trainer  # noqa: E402


def test_the_server_counts_non_finite_weights_itself():
    config = Config(env_id="CartPole-v1", workers=2)
    spaces = Spaces((4,), 2)
    model, optimizer = build_shared(config, spaces)
    # The class under Ray's actor wrapper: the same methods, called in this process.
    server = ParameterServer.__ray_metadata__.modified_class(
        config.to_dict(), spaces, model.state_dict(), optimizer.state_dict(), [0, 0, 0], {}
    )
    assert server.non_finite_counts() == {}
    name, param = next(iter(server.model.named_parameters()))
    with torch.no_grad():
        param.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), 1.0])
    assert server.non_finite_counts() == {name: 2}


class StandInRayRun:
    """The driver's view of a server whose weights went non-finite; copying its state is an error here."""

    def non_finite_counts(self) -> dict[str, int]:
        return {"body.0.weight": 2}

    def sync(self) -> None:
        raise AssertionError("the finite check copied the whole server state")


def test_the_trainers_finite_check_on_ray_takes_the_verdict_not_the_state(tmp_path):
    info = inspect_env("CartPole-v1")
    config = Config(env_id="CartPole-v1", workers=1, backend="ray").validate()
    trainer = Trainer(config, info, tmp_path / "run", show_progress=False)
    trainer.backend = StandInRayRun()
    trainer._check_finite()
    assert not trainer.params_finite
    (error,) = trainer.monitor.errors
    assert "body.0.weight (2 values)" in error.traceback
    trainer.monitor.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_checkpoint_still_refuses_non_finite_weights_from_the_server(tmp_path, bad):
    # The once-a-second check no longer sees the weights on the driver: the checkpoint's own look at what
    # it saves must still keep a non-finite state out of last.pt.
    info = inspect_env("CartPole-v1")
    config = Config(env_id="CartPole-v1", workers=1, backend="ray").validate()
    trainer = Trainer(config, info, tmp_path / "run", show_progress=False)

    class Synced(StandInRayRun):
        def sync(self) -> None:
            with torch.no_grad():
                next(trainer.model.parameters()).view(-1)[0] = bad

    trainer.backend = Synced()
    trainer._save_last()
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()
    assert not trainer.params_finite
    trainer.monitor.close()
