"""``a3c export``: a saved policy as one file that runs without this package — ONNX (for onnxruntime, in
any language) or TorchScript (``torch.jit.load``, no a3c).

The file holds the whole greedy policy (``a3c.algo.export_graph``): the run's observation
normalisation, the network and the action mapping, so a client feeds it the env's raw observations and steps
the env with what it returns. Inputs ``obs`` (and ``h``, ``c`` for a conv-LSTM), outputs ``action`` (and
``h_next``, ``c_next``); ONNX names cannot repeat, hence the suffix. docs/export.md shows a client.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import click

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint
from a3c_envs.modules import TRUST_FLAG, TRUST_HELP

if TYPE_CHECKING:  # torch and the checkpoint code load only when a command runs: `a3c --help` stays quick
    from collections.abc import Callable, Iterator

    import numpy as np
    import torch
    from torch import nn

    from a3c.rundir.checkpoints import SavedPolicy

FORMATS = ("onnx", "torchscript")
# The format an output's suffix implies when --format is not given; any other suffix: ONNX.
SUFFIX_FORMATS = {".onnx": "onnx", ".pt": "torchscript", ".pth": "torchscript", ".ts": "torchscript"}
ONNX_OPSET = 17
EXTRA_HINT = f"install the extra: {install_hint('export')}"


@dataclass(frozen=True)
class Exported:
    """What ``export_policy`` wrote: the file, its format, the checkpoint and the I/O it documents."""

    path: Path
    format: str
    checkpoint: Path
    signature: dict[str, str]


def output_format(output: Path, fmt: str | None) -> str:
    """``fmt`` when given, else the one ``output``'s suffix implies (ONNX for any other suffix)."""
    return fmt or SUFFIX_FORMATS.get(output.suffix.lower(), "onnx")


def require_onnx() -> ModuleType:
    """The ``onnx`` module, or BadInput naming the extra that installs it."""
    try:
        import onnx
    except ImportError:
        raise BadInput(f"--format onnx: needs the onnx package (extra `export`); {EXTRA_HINT}") from None
    return onnx


def example_inputs(model: nn.Module, obs_shape: tuple[int, ...], batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs to trace the policy of ``model`` with: observations [batch, *obs_shape] in the env's dtype
    (uint8 pixels, else float32), and a recurrent model's zero state ([batch, H] each)."""
    import torch

    shape = (batch, *obs_shape)
    obs = torch.zeros(shape, dtype=torch.uint8) if len(obs_shape) == 3 else torch.zeros(shape)
    if not getattr(model, "recurrent", False):
        return (obs,)
    return (obs, *model.initial_state(batch))


def io_names(recurrent: bool) -> tuple[list[str], list[str]]:
    """(input names, output names) of the exported graph."""
    if recurrent:
        return ["obs", "h", "c"], ["action", "h_next", "c_next"]
    return ["obs"], ["action"]


def signature(
    inputs: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...], recurrent: bool
) -> dict[str, str]:
    """Each input and output name → "dtype [N, ...]" (N: any batch size)."""
    names_in, names_out = io_names(recurrent)
    described = {}
    for name, tensor in zip([*names_in, *names_out], [*inputs, *outputs], strict=True):
        dims = ", ".join(["N", *(str(d) for d in tensor.shape[1:])])
        described[name] = f"{str(tensor.dtype).removeprefix('torch.')} [{dims}]"
    return described


def metadata(saved: SavedPolicy, described: dict[str, str], obs_encoding: str = "none") -> dict[str, str]:
    """What a client needs to know besides the graph: the env it was trained on and how it was made, and how
    the env's observation becomes ``obs`` (``obs_encoding``: none, one_hot or flatten, as
    ``a3c_envs.space_check``; a FrozenLake policy takes the one-hot float32 [N, 16])."""
    from a3c.core.version import __version__

    config = saved.config
    return {
        "a3c_version": __version__,
        "env_id": config.env_id,
        "frame_stack": str(config.frame_stack),
        "env_kwargs": json.dumps(config.env_kwargs),
        "obs_norm": str(config.obs_norm).lower(),
        "squash": config.squash,
        "obs_encoding": obs_encoding,
        "checkpoint": str(saved.path),
        "signature": json.dumps(described),
    }


def onnx_bytes(
    module: nn.Module, inputs: tuple[torch.Tensor, ...], recurrent: bool, props: dict[str, str]
) -> bytes:
    """``module`` as a checked ONNX model (batch axis dynamic) with ``props`` as its metadata."""
    import torch

    onnx = require_onnx()
    names_in, names_out = io_names(recurrent)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript-based exporter: torch 2.13's dynamo exporter needs onnxscript, which we do not
        # install; this one warns that it is legacy, not that anything is wrong with the graph.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            inputs,
            buffer,
            input_names=names_in,
            output_names=names_out,
            dynamic_axes={name: {0: "N"} for name in [*names_in, *names_out]},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    model = onnx.load_from_string(buffer.getvalue())
    onnx.helper.set_model_props(model, props)
    model.doc_string = f"a3c greedy policy of {props['env_id']}: {props['signature']}"
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def torchscript_bytes(module: nn.Module, inputs: tuple[torch.Tensor, ...], props: dict[str, str]) -> bytes:
    """``module`` traced to TorchScript, with ``props`` as the extra file ``a3c.json``."""
    import torch

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # torch 2.13 marks torch.jit deprecated (for torch.export); a TorchScript file is still what
        # torch.jit.load and libtorch's C++ torch::jit::load read.
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, inputs)
        torch.jit.save(traced, buffer, _extra_files={"a3c.json": json.dumps(props)})
    return buffer.getvalue()


def user_model_bytes(
    module: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    recurrent: bool,
    props: dict[str, str],
    fmt: str,
    ref: str,
) -> bytes:
    """The file of a policy whose network is the user's (``model`` ``ref``): what the exporter cannot
    express is BadInput in one line, and so is a file that does not give the actions ``module`` gives on
    random observations (tracing keeps one branch of Python control flow that depends on the values); ONNX is
    compared where onnxruntime is installed."""
    import torch

    try:
        with torch.no_grad(), silenced_stdout():
            if fmt == "onnx":
                data = onnx_bytes(module, inputs, recurrent, props)
            else:
                data = torchscript_bytes(module, inputs, props)
    except BadInput:
        raise
    except Exception as exc:  # the exporter's many errors on a graph it cannot express
        text = " ".join(str(exc).split())[:200]
        raise BadInput(f"model: {ref!r} cannot be exported to {fmt} ({type(exc).__name__}: {text})") from None
    run = exported_runner(data, fmt)
    if run is not None:
        for sample in random_inputs(inputs):
            with torch.no_grad():
                want = module(*sample)
            want, got = (want if isinstance(want, tuple) else (want,)), run(sample)
            if not all(same_values(w.numpy(), g) for w, g in zip(want, got, strict=True)):
                raise BadInput(
                    f"model: {ref!r} exported to {fmt} does not give the actions torch gives on the same "
                    "observations (Python control flow on tensor values is traced as one branch); write it "
                    "with tensor operations (torch.where) to export it"
                )
    return data


@contextlib.contextmanager
def silenced_stdout() -> Iterator[None]:
    """File descriptor 1 to /dev/null meanwhile: torch 2.13's ONNX exporter always logs (its check of the
    log setting tests the function, not its result) and, on an error, prints the whole graph there from C++;
    the error's one line says what failed."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def exported_runner(data: bytes, fmt: str) -> Callable[[tuple[torch.Tensor, ...]], list[np.ndarray]] | None:
    """A function running the exported file on inputs (tensors) → its outputs as numpy arrays; None for
    ONNX without onnxruntime."""
    import torch

    if fmt == "onnx":
        try:
            import onnxruntime as ort
        except ImportError:
            return None
        session = ort.InferenceSession(data)
        names = [i.name for i in session.get_inputs()]
        return lambda xs: session.run(None, {n: x.numpy() for n, x in zip(names, xs, strict=True)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = torch.jit.load(io.BytesIO(data))

    def run(xs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
        with torch.no_grad():
            out = loaded(*xs)
        return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]

    return run


def random_inputs(inputs: tuple[torch.Tensor, ...], count: int = 4) -> list[tuple[torch.Tensor, ...]]:
    """``count`` seeded random inputs shaped like ``inputs`` at batch sizes 1 and 3: observations
    (pixels 0-255, else standard normal ×2) and a recurrent state (standard normal)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    samples = []
    for k in range(count):
        batch = 1 if k % 2 else 3
        drawn = []
        for x in inputs:
            shape = (batch, *x.shape[1:])
            if x.dtype == torch.uint8:
                drawn.append(torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8))
            else:
                drawn.append(torch.randn(shape, generator=gen) * 2)
        samples.append(tuple(drawn))
    return samples


def same_values(want: np.ndarray, got: np.ndarray) -> bool:
    """Equal integer actions; float ones (Box, a recurrent state) within float32 rounding."""
    import numpy as np

    if want.shape != got.shape:
        return False
    if want.dtype.kind in "iub":
        return bool(np.array_equal(want, got))
    return bool(np.allclose(want, got, rtol=1e-4, atol=1e-5))


def export_policy(
    target: Path, output: Path, fmt: str | None = None, trust_env_module: bool = False
) -> Exported:
    """Write the greedy policy of ``target`` (a checkpoint, or a run dir: its best.pt) to ``output`` in
    ``fmt`` (None: from the suffix, see ``output_format``), atomically. Bad input is BadInput.
    ``trust_env_module``: as ``load_policy``'s."""
    fmt = output_format(output, fmt)
    if fmt not in FORMATS:
        raise BadInput(f"--format: {fmt!r} is not allowed; expected one of {', '.join(FORMATS)}")
    if not output.parent.is_dir():
        raise BadInput(f"--output: the folder {str(output.parent)!r} does not exist")
    if fmt == "onnx":
        require_onnx()  # before the checkpoint is loaded: a missing extra is said at once
    import torch

    from a3c.algo.distributions import ActionDist
    from a3c.algo.export_graph import greedy_module
    from a3c.core.spaces import Spaces
    from a3c.rundir.checkpoints import load_checkpoint, load_policy
    from a3c.rundir.files import atomic_write

    saved = load_policy(target, trust_env_module)
    if output.resolve() == saved.path.resolve():
        raise BadInput(f"--output: {str(output)!r} is the checkpoint itself; choose another file")
    spaces = Spaces.of_checkpoint(load_checkpoint(saved.path))  # load_policy checked them against the env
    dist = ActionDist.of_spaces(spaces, saved.config.squash)
    module = greedy_module(saved.model, dist, saved.obs_stats)
    recurrent = bool(getattr(saved.model, "recurrent", False))
    if recurrent and len(saved.model.initial_state(1)) != 2:
        raise BadInput(
            f"model: {saved.config.model!r} is recurrent with a state of {len(saved.model.initial_state(1))} "
            "tensors; export takes two (h, c), as an LSTM's"
        )
    inputs = example_inputs(saved.model, spaces.obs_shape)
    with torch.no_grad():
        outputs = module(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    described = signature(inputs, outputs, recurrent)
    props = metadata(saved, described, spaces.obs_encoding)
    user_ref = getattr(saved.model, "ref", None)  # the user's network (a3c.algo.user_model.UserModel)
    if user_ref is None:
        with torch.no_grad():
            data = (
                onnx_bytes(module, inputs, recurrent, props)
                if fmt == "onnx"
                else torchscript_bytes(module, inputs, props)
            )
    else:
        data = user_model_bytes(module, inputs, recurrent, props, fmt, user_ref)
    try:
        atomic_write(output, lambda f: f.write(data))
    except OSError as exc:  # a full disk or a read-only folder: one line, not a traceback
        raise BadInput(f"--output: cannot write {str(output)!r}: {exc.strerror or exc}") from None
    return Exported(output, fmt, saved.path, described)


@click.command("export")
@click.argument("target", type=click.Path(path_type=Path), metavar="RUN_DIR|CHECKPOINT")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path, dir_okay=False), required=True, help="File to write."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="onnx (onnxruntime; extra `export`) or torchscript (torch.jit.load).  "
    "[default: torchscript for a .pt, .pth or .ts output, else onnx]",
)
@click.option(TRUST_FLAG, "trust_env_module", is_flag=True, help=TRUST_HELP)
def export_command(target: Path, output: Path, fmt: str | None, trust_env_module: bool) -> None:
    """Write a checkpoint's greedy policy (a run dir: its checkpoints/best.pt) as one file that runs without
    a3c: observation normalisation, network and action mapping. See docs/export.md."""
    result = export_policy(target, output, fmt, trust_env_module)
    io_text = "; ".join(f"{name} {kind}" for name, kind in result.signature.items())
    click.echo(f"wrote {result.path} ({result.format}: {io_text}) from {result.checkpoint}")
