"""The ``device`` field: what ``auto`` picks, what a machine without the GPU asked for says, and the one line
a full GPU memory gives (a3c/core/devices.py). A GPU is played by patching torch.cuda's answers: nothing
here creates a CUDA tensor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.core.config import Config
from a3c.core.devices import out_of_memory_line, resolve_device, to_device
from a3c.core.errors import BadInput


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_auto_keeps_the_mlp_on_the_cpu_and_puts_other_networks_on_the_first_gpu(two_gpus):
    assert resolve_device("auto", "mlp") == torch.device("cpu")
    assert resolve_device("auto", "cnn") == torch.device("cuda", 0)
    assert resolve_device("auto", "my_nets:build") == torch.device("cuda", 0)
    assert resolve_device("cuda", "mlp") == torch.device("cuda", 0)  # asked for: granted, MLP or not
    assert resolve_device("cuda:1", "cnn") == torch.device("cuda", 1)


def test_auto_is_the_cpu_without_cuda_and_on_ray(two_gpus, monkeypatch):
    assert resolve_device("auto", "cnn", backend="ray") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto", "cnn") == torch.device("cpu")
    assert resolve_device("cpu", "cnn") == torch.device("cpu")


def test_a_gpu_this_machine_lacks_is_one_line_naming_what_is_allowed(two_gpus, monkeypatch):
    with pytest.raises(
        BadInput,
        match=r"^device: 'cuda:2' is not allowed on this machine; expected auto, "
        r"cpu, cuda or cuda:0 \.\. cuda:1 \(2 CUDA devices\)$",
    ):
        resolve_device("cuda:2", "cnn")
    with pytest.raises(
        BadInput, match=r"^device: 'cuda' is not allowed with backend ray; expected auto or cpu"
    ):
        resolve_device("cuda", "cnn", backend="ray")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        BadInput,
        match=r"^device: 'cuda' is not allowed on this machine; expected auto or cpu \("
        r"torch .* sees no CUDA device: .*\)$",
    ):
        resolve_device("cuda", "mlp")


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "CPU", "mps"])
def test_the_config_refuses_a_device_it_does_not_know(name):
    with pytest.raises(
        BadInput, match=rf"^device: '{name}' is not allowed; expected auto, cpu, cuda or cuda:N$"
    ):
        Config(env_id="CartPole-v1", device=name).validate()


def test_a_full_gpu_memory_is_one_line_naming_what_to_lower():
    line = out_of_memory_line(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore"))
    assert line is not None and "\n" not in line
    assert line.startswith("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert "--workers" in line and "--envs-per-worker" in line and "--device cpu" in line
    assert out_of_memory_line(RuntimeError("CUDA error: an illegal memory access")) is None


def test_a_batch_stays_the_same_memory_on_the_cpu():
    batch = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = to_device(batch, torch.device("cpu"))
    tensor[0, 0] = 7.0
    assert batch[0, 0] == 7.0  # no copy on the CPU path
