"""The device path on a machine without a GPU: a GPU asked for is one line before anything is made, a
checkpoint written on a GPU evaluates, exports and loads here, a full GPU memory ends the run in one line
with last.pt intact, and the trainer holds the shared tensors until its children are gone (docs/gpu.md).
The CUDA runtime itself is tested by tests/gpu (``pytest -m cuda``) on a machine that has one."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch

import a3c
from a3c.core.config import Config
from a3c.rundir.checkpoints import load_checkpoint
from a3c.runtime.supervisor import Supervisor
from a3c.training.train import Trainer
from a3c_envs import inspect_env
from tests.support.commands import call_a3c, call_a3c_train
from tests.support.run_files import read_json


def test_a_gpu_this_machine_lacks_is_one_line_and_nothing_is_made(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run_dir = tmp_path / "run"
    result = call_a3c_train("--env", "CartPole-v1", "--device", "cuda", "--run-dir", str(run_dir))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        "error: device: 'cuda' is not allowed on this machine; expected auto or cpu"
    )
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not run_dir.exists()


def save_as_a_gpu_would(path: Path) -> None:
    """Write ``path`` again with every storage tagged ``cuda:0``, as torch.save tags a GPU tensor's: loading
    it without a map_location then needs CUDA."""
    data = torch.load(path, map_location="cpu", weights_only=True)
    entry = (0, lambda obj: "cuda:0", lambda obj, location: None)  # (priority, tagger, deserializer)
    torch.serialization._package_registry.insert(0, entry)
    try:
        torch.save(data, path)
    finally:
        torch.serialization._package_registry.remove(entry)


@pytest.mark.slow
def test_a_checkpoint_saved_on_a_gpu_evaluates_exports_and_loads_on_the_cpu(tmp_path):
    run_dir = tmp_path / "run"
    trained = call_a3c_train(
        "--env", "CartPole-v1", "--serial", "--max-steps", "600", "--quiet", "--run-dir", str(run_dir)
    )
    assert trained.returncode == 0, trained.stderr
    for name in ("best.pt", "last.pt"):
        save_as_a_gpu_would(run_dir / "checkpoints" / name)
    with pytest.raises(RuntimeError, match="CUDA"):  # the file is what a GPU run leaves
        torch.load(run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert load_checkpoint(run_dir)["model_state"]["value_head.bias"].device.type == "cpu"
    evaluated = call_a3c("evaluate", str(run_dir), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    action = a3c.load(run_dir).predict(torch.zeros(4).numpy())
    assert int(action) in (0, 1)
    exported = call_a3c("export", str(run_dir), "-o", str(tmp_path / "policy.onnx"))
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "policy.onnx").is_file()


@pytest.mark.slow
def test_a_full_gpu_memory_ends_the_run_in_one_line_without_restarts_and_keeps_last_pt(tmp_path):
    run_dir = tmp_path / "run"
    result = call_a3c_train(
        "--env", "CartPole-v1", "--model", "tests.support.models:out_of_memory", "--workers", "2",
        "--max-steps", "100000", "--quiet", "--run-dir", str(run_dir),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert (
        errors[0].startswith("error: worker ")
        and "CUDA out of memory. Tried to allocate 2.00 GiB" in errors[0]
    )
    assert "lower --workers, --envs-per-worker or the network's size" in errors[0]
    assert "restarting" not in result.stderr  # a restart would meet the same full memory
    assert read_json(run_dir / "summary.json")["restarts"] == 0
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["global_step"] == 0


@pytest.mark.slow
def test_the_trainer_holds_the_shared_model_until_every_child_has_exited_and_not_after(tmp_path, monkeypatch):
    info = inspect_env("CartPole-v1")
    config = Config(env_id=info.env_id, workers=2, max_steps=3000, eval_interval=0.5).validate()
    trainer = Trainer(config, info, tmp_path / "run", show_progress=False)
    model = weakref.ref(trainer.model)
    seen: dict[str, object] = {}
    stop_all = Supervisor.stop_all

    def stop_all_then_look(self: Supervisor, deadline) -> None:
        stop_all(self, deadline)
        seen["exit codes"] = [child.process.exitcode for child in self.children]
        # What the children were given is the trainer's own: its model and the shared state it hands out.
        seen["held"] = trainer.model is model() and trainer.shared.model is model()

    monkeypatch.setattr(Supervisor, "stop_all", stop_all_then_look)
    assert trainer.run() == 0
    assert None not in seen["exit codes"] and len(seen["exit codes"]) == 3, seen
    assert seen["held"] is True
    trainer = None
    gc.collect()
    assert model() is None  # nothing else keeps a finished run's tensors (a GPU's memory) alive
