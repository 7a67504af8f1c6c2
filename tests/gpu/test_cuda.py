"""The device path on a GPU (``pytest -m cuda``; ``make bench-gpu`` runs them): the shared buffer and moments
are CUDA tensors that a forkserver child writes in place, a learner updates them there, a run trains on the
GPU and leaves checkpoints of CPU tensors and no CUDA IPC file behind. Skipped where torch sees no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from a3c.algo.learner import Learner, build_shared
from a3c.algo.networks import TorchPolicy
from a3c.algo.optim import assert_shared, flat_view
from a3c.core.config import Config
from a3c.core.devices import PinnedStage, to_device
from a3c.runtime.context import child_context
from a3c_envs import inspect_env
from tests.support.commands import run_a3c
from tests.support.cuda_child import add_one_to_the_shared_weights

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device here"),
]
CUDA = torch.device("cuda", 0)


def shared_on_gpu(**values):
    info = inspect_env("CartPole-v1")
    config = Config(env_id=info.env_id, device="cuda", **values).validate()
    model, optimizer = build_shared(config, info.spaces)
    return config, model, optimizer


def test_the_shared_buffer_and_moments_live_on_the_gpu_and_the_step_counts_on_the_host():
    _, model, optimizer = shared_on_gpu()
    assert_shared(model, optimizer)
    assert flat_view(model).device == CUDA
    (state,) = optimizer.state.values()
    assert state["exp_avg"].device == CUDA and state["exp_avg_sq"].device == CUDA
    assert state["step"].device.type == "cpu" and state["step"].is_shared()


def test_a_forkserver_child_writes_the_trainers_cuda_weights_in_place():
    _, model, _ = shared_on_gpu()
    before = flat_view(model).clone()
    ctx = child_context()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=add_one_to_the_shared_weights, args=(model, writer))
    child.start()
    writer.close()
    try:
        assert reader.poll(120), "the child sent nothing"
        assert reader.recv() == "cuda:0"
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
            child.join(timeout=10)
    assert child.exitcode == 0
    torch.testing.assert_close(flat_view(model), before + 1.0)  # the same memory, not a copy


@pytest.mark.parametrize("model_name", ["mlp", "tests.support.models:Recurrent"])
def test_a_learner_acts_and_steps_the_shared_model_on_the_gpu(model_name):
    config, model, optimizer = shared_on_gpu(model=model_name, envs_per_worker=4, t_max=8)
    before = flat_view(model).clone()
    learner = Learner(config, model, optimizer, seed=0)
    try:
        assert learner.device == CUDA and learner.numpy_grad is None
        assert isinstance(learner.policy, TorchPolicy)
        for _ in range(3):
            result = learner.update()
            assert np.isfinite(result.grad_norm)
    finally:
        learner.close()
    assert not torch.equal(flat_view(model), before)
    assert flat_view(learner.local_model).device == CUDA


def test_a_pinned_batch_arrives_whole_on_the_gpu():
    batch = np.random.default_rng(0).random((64, 4, 84, 84)).astype(np.float32)
    tensor = to_device(batch, CUDA)
    assert tensor.device == CUDA
    np.testing.assert_array_equal(tensor.cpu().numpy(), batch)
    stage = PinnedStage(CUDA)
    frames = np.random.default_rng(1).integers(0, 255, (3, 16, 4, 84, 84), dtype=np.uint8)
    for step in frames:  # the one buffer rewritten each step, each result read back before the next
        np.testing.assert_array_equal(stage(step).cpu().numpy(), step)
    assert len(stage.buffers) == 1 and next(iter(stage.buffers.values())).is_pinned()
    for rows in (16, 9, 3, 1):  # greedy play's batch shrinking as games end: the first rows of that buffer
        np.testing.assert_array_equal(stage(frames[0][:rows]).cpu().numpy(), frames[0][:rows])
    assert len(stage.buffers) == 1


def test_a_run_on_the_gpu_trains_and_leaves_cpu_checkpoints_and_no_ipc_file(tmp_path: Path):
    before = set(Path("/dev/shm").glob("torch_*"))
    run_dir = tmp_path / "run"
    result = run_a3c(
        "train", "--env", "CartPole-v1", "--device", "cuda", "--workers", "2", "--max-steps", "20000",
        "--quiet", "--run-dir", str(run_dir), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Producer process has been terminated" not in result.stderr  # every child released its tensors
    assert json.loads((run_dir / "config.json").read_text())["device_used"] == "cuda:0"
    for name in ("last.pt", "best.pt"):
        data = torch.load(run_dir / "checkpoints" / name, weights_only=True)  # no map_location needed
        assert {t.device.type for t in data["model_state"].values()} == {"cpu"}
    assert set(Path("/dev/shm").glob("torch_*")) <= before
