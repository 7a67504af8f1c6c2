"""The ``a3c train`` options made from the Config fields, and the run those options describe.

A Config field with an ``"option"`` in its metadata (see ``a3c.core.config``) is an ``a3c train`` option:
its flag, type, choices, help and shown default all come from the field. The option's default is None,
so that an option not given leaves the value to the env's preset (``a3c.training.resolve``); a bool field is a
flag, True when given, else None.

``train_setup`` is the rest of ``a3c train`` below click: from the options given to the config, env, run
dir and checkpoint of the run, or BadInput (exit 2) for anything that does not fit. It imports the
heavy modules itself, so that ``a3c.cli`` can start the forkserver first.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import Field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from a3c.core.config import Config, field_type
from a3c.core.cpus import AUTO
from a3c.core.errors import BadInput
from a3c.core.extras import install_hint

if TYPE_CHECKING:
    from a3c.core.limits import Memory
    from a3c.core.spaces import Spaces
    from a3c_envs import EnvInfo

F = TypeVar("F", bound=Callable[..., Any])


def option_fields(config: type = Config) -> list[Field]:
    """The fields of ``config`` that have a command-line option, in field order."""
    return [f for f in fields(config) if "option" in f.metadata]


def option_help(f: Field, config: type = Config) -> str:
    """The option's help: the field's help as a sentence, then its default as ``--help`` shows it."""
    text = f.metadata["help"]
    text = text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
    shown = f.metadata.get("shown_default")
    is_flag = field_type(f.name, config) is bool  # off unless given: no default to show
    if shown is None and f.default is not None and not is_flag:
        shown = "{}"
    return text if shown is None else f"{text}  [default: {shown.format(f.default)}]"


class IntOrAuto(click.ParamType):
    """An integer option that also takes ``auto`` (resolved when the run is set up)."""

    name = f"integer or {AUTO}"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | str:
        """``value`` as an int, or ``auto``; anything else is click's usage error (exit 2)."""
        if isinstance(value, int) or value == AUTO:
            return value
        if str(value).strip().lower() == AUTO:
            return AUTO
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is not an integer or {AUTO}", param, ctx)


def config_option(f: Field, config: type = Config) -> Callable[[F], F]:
    """The click option of field ``f`` of ``config``: its value goes to the parameter named like the field,
    None when the option is not given."""
    kind, choices = field_type(f.name, config), f.metadata.get("choices")
    if f.metadata.get("auto"):
        kind = IntOrAuto()
    if kind is bool:
        return click.option(
            f.metadata["option"], f.name, is_flag=True, default=None, help=option_help(f, config)
        )
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[0] is str:  # repeatable: --wrapper A
        return click.option(
            f.metadata["option"],
            f.name,
            multiple=True,
            metavar="PKG.MODULE:NAME",
            callback=lambda _ctx, _param, value: tuple(value) or None,  # none given: not given
            help=option_help(f, config),
        )
    return click.option(
        f.metadata["option"],
        f.name,
        type=click.Choice(choices) if choices else kind,
        default=None,
        help=option_help(f, config),
    )


def config_options(*names: str, rest: bool = False, config: type = Config) -> Callable[[F], F]:
    """Decorator: the options of the fields ``names``, in this order, where it stands among the options.

    With ``rest=True``, then every other field with an option that the decorators below this one have not
    added, in field order: put it on the topmost ``config_options`` of a command, and a field given an
    ``"option"`` is an option of that command with no other change.
    """
    by_name = {f.name: f for f in option_fields(config)}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"config_options: {unknown} are not fields with an option")

    def decorate(command: F) -> F:
        placed = {p.name for p in getattr(command, "__click_params__", ())}
        twice = placed.intersection(names)
        if twice:
            raise ValueError(f"config_options: the options of {sorted(twice)} are already there")
        chosen = list(names)
        if rest:
            chosen += [name for name in by_name if name not in placed and name not in names]
        for name in reversed(chosen):  # click lists the option decorated last first
            command = config_option(by_name[name], config)(command)
        return command

    return decorate


class TrainSetup(NamedTuple):
    """What ``a3c train`` runs: the config, the env, the run dir and, on a resume, the checkpoint; whether
    the worker count is ``auto``'s (one per usable CPU); whether the env's preset was left out because the
    env kwargs change its spaces."""

    config: Config
    info: EnvInfo
    run_dir: Path
    checkpoint: dict[str, Any] | None
    auto_workers: bool = False
    skipped_preset: bool = False


def train_setup(
    env_id: str | None,
    options: dict[str, Any],
    overrides: tuple[str, ...] | dict[str, Any],
    *,
    run_dir: Path | None,
    force: bool,
    resume: Path | None,
    serial: bool,
) -> TrainSetup:
    """The run ``a3c train`` was asked for; anything that does not fit is BadInput (exit 2).

    Args:
        env_id: ``--env``, None when not given (then ``env_id`` of the config file, if any).
        options: the config options by field name, None where not given (``env_kwargs``: a dict, merged
            over the file's); ``no_preset`` (``--no-preset``: the env's preset is ignored, derived defaults
            only) and ``config_file`` (``--config``: a TOML file of config values, over the preset and under
            the options), if given.
        overrides: the ``--set KEY=VALUE`` items, or typed values by field name (the Python API's).
        run_dir, force, resume, serial: ``--run-dir``, ``--force``, ``--resume``, ``--serial``.
    """
    from a3c.core.config import check_env_kwargs, parse_set, parse_values
    from a3c.rundir.files import check_run_dir, default_run_dir
    from a3c_envs.user_envs import run_name

    workers = options.get("workers")
    if serial and workers not in (None, 1, AUTO):
        raise BadInput(f"--workers: {workers} is not allowed with --serial; expected 1")
    parsed = parse_values(overrides) if isinstance(overrides, dict) else parse_set(overrides)
    options = dict(options)
    trust = bool(options.pop("trust_env_module", False))
    env_id, from_file = _config_file(options.pop("config_file", None), env_id, resume, trust)
    kwargs = {**from_file.get("env_kwargs", {}), **(options.get("env_kwargs") or {})}
    kwargs = check_env_kwargs({**kwargs, **parsed.get("env_kwargs", {})})
    asked = parsed.get("workers", workers)  # --set wins over --workers
    if serial and parsed.get("workers") == AUTO:
        parsed["workers"] = 1
    options = {**options, "workers": 1 if serial else workers}
    use_preset = not options.pop("no_preset", False)
    skipped = False
    if resume is not None:
        if run_dir is not None or force:
            raise BadInput("--resume: RUN_DIR is the run dir; --run-dir and --force are not allowed with it")
        if not use_preset:
            raise BadInput("--no-preset: not allowed with --resume (the run's saved config is used)")
        from a3c.training.resuming import resume_config

        config, info, checkpoint = resume_config(resume, env_id, options, parsed, trust, from_file)
        run_dir = resume
        auto = not serial and asked == AUTO
    elif env_id is None:
        raise BadInput("--env: missing; expected a Gymnasium env id (or --resume RUN_DIR)")
    else:
        config, info, skipped, from_preset = _fresh_config(
            env_id, {**options, "env_kwargs": kwargs}, parsed, from_file, use_preset
        )
        auto = not serial and (asked == AUTO or (asked is None and from_preset == AUTO))
        checkpoint = None
        run_dir = run_dir or default_run_dir(run_name(info.env_id), config.seed)
        check_run_dir(run_dir, force)
    if serial and config.workers != 1:
        raise BadInput(f"workers: {config.workers} is not allowed with --serial; expected 1")
    if config.backend == "local" and not serial:
        _check_machine(config, info.spaces)
    if config.backend == "ray":
        _check_ray(config, info.spaces, serial)
    if config.tensorboard:
        from a3c.rundir.tensorboard import check_available

        check_available()
    if config.track != "none":  # before the run dir exists: a missing extra leaves nothing behind
        from a3c.training.trackers import check_available as check_tracker

        check_tracker(config.track)
    return TrainSetup(config, info, run_dir, checkpoint, auto_workers=auto, skipped_preset=skipped)


def _config_file(
    path: Path | None, env_id: str | None, resume: Path | None, trust: bool
) -> tuple[str | None, dict]:
    """The env id of the run (``--env``, else the ``--config`` file's ``env_id`` for a fresh run) and the
    file's values ({} without a file; its ``env_id`` kept for a resume to check). BadInput when the two env
    ids differ, or when the file's env id would import a module from the current directory (a file from
    someone else: ``a3c_envs.modules``) unless ``trust``."""
    from a3c.training.resolve import read_config_file
    from a3c_envs.modules import check_code_modules

    from_file = {} if path is None else read_config_file(path)
    file_env = from_file.get("env_id")
    if env_id is not None and file_env is not None and env_id != file_env:
        raise BadInput(f"--env: {env_id!r} does not match env_id {file_env!r} of --config {str(path)!r}")
    fresh_env = file_env if file_env is not None and env_id is None and resume is None else None
    source = f"--config {str(path)!r}"
    check_code_modules(fresh_env, from_file.get("wrappers"), from_file.get("model"), trust, source)
    env_id = fresh_env if fresh_env is not None else env_id
    return env_id, from_file


def _fresh_config(
    env_id: str, options: dict[str, Any], parsed: dict[str, Any], from_file: dict[str, Any], use_preset: bool
) -> tuple[Config, EnvInfo, bool, str]:
    """A new run's config and env; whether the env's preset was skipped (the env kwargs or wrappers change
    the spaces it was measured on); the worker count the preset or the file asks for (``auto`` when neither
    does)."""
    from a3c.training.resolve import resolve_config
    from a3c_envs import inspect_env, load_preset

    kwargs = options["env_kwargs"]
    # The wrappers as asked for (an option, --set or the file's); the config checks them once it is built.
    wrappers = parsed.get("wrappers", options.get("wrappers") or from_file.get("wrappers") or ())
    info = inspect_env(env_id, env_kwargs=kwargs, wrappers=wrappers)
    skipped = False
    if use_preset and (kwargs or wrappers) and load_preset(info.env_id) is not None:
        # A preset is measured on the env as made by default: not for one whose spaces the kwargs change.
        use_preset = inspect_env(env_id).spaces == info.spaces
        skipped = not use_preset
    config = resolve_config(info, options, parsed, use_preset=use_preset, from_file=from_file)
    preset = (load_preset(info.env_id) if use_preset else None) or {}
    from_preset = str(from_file.get("workers", preset.get("workers", AUTO))).strip().lower()
    if config.frame_stack > 1 or config.env_kwargs != kwargs or config.wrappers != tuple(wrappers):
        # the model is built for these spaces
        info = inspect_env(
            env_id, frame_stack=config.frame_stack, env_kwargs=config.env_kwargs, wrappers=config.wrappers
        )
    return config, info, skipped, from_preset


def _check_machine(config: Config, spaces: Spaces) -> None:
    """BadInput when this machine cannot hold the run: ``config.workers`` worker processes (file
    descriptors, memory), or its network's weights, optimizer moments and copies (``_check_model_memory``).
    Memory is what this process may still use: MemAvailable or its cgroup's limit, the lower."""
    from a3c.core.limits import available_memory, max_local_workers

    memory = available_memory()
    most, why = max_local_workers(memory)
    if config.workers > most:
        raise BadInput(
            f"workers: {config.workers} is not allowed on this machine; expected at most {most} ({why})"
        )
    if memory is not None:
        _check_model_memory(config, spaces, memory)


def _check_model_memory(config: Config, spaces: Spaces, memory: Memory) -> None:
    """BadInput naming the field that sizes the network (``hidden_sizes``, ``lstm_size``, the user's
    ``model``) when its parameters, counted on torch's meta device (nothing allocated), would not fit the
    memory beside the workers (``a3c.core.limits.model_memory``). A network on a GPU is not counted here."""
    from a3c.core.limits import WORKER_MEMORY, model_memory

    parameters = _parameter_count(config, spaces)
    if parameters is None:
        return
    need = model_memory(parameters, config.optimizer, config.workers)
    if need + config.workers * WORKER_MEMORY <= memory.available:
        return
    if config.model == "mlp":
        field, value = "hidden_sizes", ",".join(map(str, config.hidden_sizes))
    elif config.model == "cnn":
        field, value = ("lstm_size", str(config.lstm_size)) if config.lstm_size else ("model", "'cnn'")
    else:
        field, value = "model", repr(config.model)
    raise BadInput(
        f"{field}: {value} is not allowed on this machine; the network has {parameters:,} parameters, whose "
        f"weights, {config.optimizer} moments, checkpoint snapshot and {config.workers} workers' and the "
        f"evaluator's copies need ~{need / 2**30:.1f} GiB beside ~64 MiB a worker, and memory has "
        f"{memory.words()}; expected a smaller network or fewer workers"
    )


def _parameter_count(config: Config, spaces: Spaces) -> int | None:
    """The parameter count of the network ``config`` builds for ``spaces``, built on torch's meta device
    (shapes only); None for a network on a GPU, or one whose builder does not run on the meta device (its
    real build says what is wrong)."""
    import torch

    from a3c.algo.learner import build_model
    from a3c.algo.user_model import build_user_model
    from a3c.core.config import BUILTIN_MODELS
    from a3c.core.devices import resolve_device

    try:
        if resolve_device(config.device, config.model, config.backend).type != "cpu":
            return None
    except BadInput:
        return None  # the device is refused where the run starts, in its own words
    try:
        with torch.device("meta"):
            if config.model in BUILTIN_MODELS:
                model = build_model(config, spaces)
            else:  # the builder only: its sample batch is checked where the run builds it for real
                model = build_user_model(config.model, spaces, check=False)
    except Exception:  # noqa: BLE001 - the user's builder, on a device it may not expect
        return None
    return sum(p.numel() for p in model.parameters())


def _check_ray(config: Config, spaces: Spaces, serial: bool) -> None:
    """BadInput unless the Ray backend can run ``config``: not serial, the ``ray`` extra installed, and a
    cluster it may use: a ``--ray-address`` where a head answers and demands a token, or, without one, an
    environment that starts the run's own cluster with token authentication, on a machine that holds the
    workers and the network (``_check_machine``: the run's own cluster is this machine). Checked before the
    run dir exists, so a typo leaves nothing behind and nothing is overwritten."""
    if serial:
        raise BadInput("--serial: not allowed with --backend ray; expected the local backend")
    from a3c.core.user_code import by_value
    from a3c_envs.user_envs import code_references

    sent = by_value(code_references(config))
    if sent:
        raise BadInput(
            f"--backend: ray is not allowed with {', '.join(sent)} (defined in a script or notebook, or not "
            "importable by name); expected the local backend, or the object in an importable module"
        )
    try:
        import grpc  # noqa: F401 - the token check's client (backends/ray/token_auth.py)
        import psutil  # noqa: F401 - the listening check's reader (backends/ray/listening.py)
        import ray
    except ImportError as exc:
        raise BadInput(
            f"--backend: ray needs the `ray` extra, which is not fully installed ({exc}); install it with "
            f"{install_hint('ray')} (Ray 2.60)"
        ) from None
    if ray.is_initialized():
        return  # the caller's own Ray (a notebook's): the caller's to judge (backends/ray/cluster.py)
    from a3c.backends.ray.cluster import check_address, check_start_env

    try:
        if config.ray_address is None:
            check_start_env()
        else:
            check_address(config.ray_address)
    except (ConnectionError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    if config.ray_address is None:  # the run's own cluster: its workers are processes on this machine
        _check_machine(config, spaces)
