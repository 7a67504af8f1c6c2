"""The config of ``a3c train --resume``: the run's saved config under a ``--config`` file, the options and
``--set``, checked against the checkpoint, its env and its CSVs before anything in the run dir changes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.core.config import Config
from a3c.core.errors import BadInput

if TYPE_CHECKING:
    from a3c_envs import EnvInfo


def resume_config(
    run_dir: Path,
    env_id: str | None,
    options: dict[str, Any],
    overrides: dict[str, Any],
    trust: bool = False,
    from_file: dict[str, Any] | None = None,
) -> tuple[Config, EnvInfo, dict[str, Any]]:
    """The config, env and checkpoint of a resume; anything that does not fit is BadInput (exit 2).

    The saved config, then a ``--config`` file's values, then the options given (None: not given), then
    ``--set`` (``env_kwargs`` merged key by key), validated as a whole; env and model shape may not change.
    ``trust``: ``--trust-env-module`` (``a3c_envs.modules``).
    """
    import json

    from a3c.rundir.files import check_resume_dir

    check_resume_dir(run_dir)  # a run dir with nothing to resume is refused before torch is imported

    from a3c.rundir.checkpoints import env_named, saved_config
    from a3c.rundir.resume import check_compatible, check_logs, load_resume_checkpoint
    from a3c.training.resolve import layer
    from a3c_envs import inspect_env
    from a3c_envs.modules import check_code_modules
    from a3c_envs.user_envs import code_references, refuse_unknown_script_code

    checkpoint = load_resume_checkpoint(run_dir)
    saved, saved_spaces = saved_config(checkpoint, run_dir / "checkpoints" / "last.pt")
    try:
        recorded_env = json.loads((run_dir / "config.json").read_text()).get("env_id")
    except (OSError, ValueError, AttributeError):
        recorded_env = None
    if recorded_env != saved.env_id:
        raise BadInput(
            f"--resume: checkpoints/last.pt is for {saved.env_id!r} but {str(run_dir)!r} is a run of "
            f"{recorded_env!r}; a checkpoint of another env cannot be resumed here"
        )
    if env_id is not None and env_id != saved.env_id:
        raise BadInput(f"--env: {env_id!r} does not match the resumed run's env {saved.env_id!r}")
    from_file = dict(from_file or {})
    if from_file.get("env_id", saved.env_id) != saved.env_id:
        raise BadInput(
            f"--config: env_id {from_file['env_id']!r} does not match the resumed run's env {saved.env_id!r}"
        )
    check_code_modules(saved.env_id, saved.wrappers, saved.model, trust, f"--resume: {str(run_dir)!r}")
    refuse_unknown_script_code(code_references(saved), f"--resume: {str(run_dir)!r}")
    info = inspect_env(
        saved.env_id, frame_stack=saved.frame_stack, env_kwargs=saved.env_kwargs, wrappers=saved.wrappers
    )
    if info.spaces != saved_spaces:
        raise BadInput(
            f"--resume: the checkpoint's model was built for spaces {saved_spaces}; {env_named(saved)} has "
            f"{info.spaces}"
        )
    values = saved.to_dict()
    for given in (from_file, {k: v for k, v in options.items() if v is not None}, overrides):
        layer(values, given)
    config = Config(**values).validate()
    check_compatible(checkpoint, config, run_dir)
    check_logs(run_dir)
    return config, info, checkpoint
