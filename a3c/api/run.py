"""``a3c.train`` and ``a3c.resume``: a training run from Python, the run ``a3c train`` makes; ``Run``: its
files read back."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.api.policy import Policy, load
from a3c.core.extras import install_hint
from a3c.rundir.lock import refuse_if_held

if TYPE_CHECKING:
    import gymnasium as gym
    import pandas as pd


class TrainingFailed(RuntimeError):
    """A run that ended in failure (the command's exit code 1): a child's or the trainer's error, printed
    with its traceback on stderr. ``run`` is the run, whose files are kept."""

    def __init__(self, run: Run):
        super().__init__(
            f"training failed (exit 1; its traceback is on stderr); run dir {str(run.run_dir)!r}"
        )
        self.run = run


@dataclass(frozen=True)
class Run:
    """A run directory and how its training ended (``exit_code``: the command's, 0 finished, 130 SIGINT,
    143 SIGTERM, 129 SIGHUP). Its files (docs/runs.md) are read when asked for, so a ``Run`` of a run still
    going on shows its rows so far."""

    run_dir: Path
    exit_code: int | None = None

    @property
    def config(self) -> dict[str, Any]:
        """config.json: every resolved config value, the versions and the command line."""
        return json.loads((self.run_dir / "config.json").read_text())

    @property
    def summary(self) -> dict[str, Any]:
        """summary.json: solved, time_to_solve_s, best_mean_return, exit_reason, ... ({} before it ends)."""
        try:
            return json.loads((self.run_dir / "summary.json").read_text())
        except FileNotFoundError:
            return {}

    @property
    def evals(self) -> pd.DataFrame:
        """eval.csv: one row per evaluation (wall_time, global_step, mean_return, ...)."""
        return self._table("eval.csv")

    @property
    def episodes(self) -> pd.DataFrame:
        """episodes.csv: one row per training episode (wall_time, global_step, worker, return, length)."""
        return self._table("episodes.csv")

    @property
    def metrics(self) -> pd.DataFrame:
        """metrics.csv: one row per worker about once a second (losses, entropy, policy lag, steps/s)."""
        return self._table("metrics.csv")

    def policy(self, which: str = "best") -> Policy:
        """The run's saved policy: ``best`` (checkpoints/best.pt) or ``last`` (checkpoints/last.pt)."""
        if which not in ("best", "last"):
            from a3c.core.errors import BadInput

            raise BadInput(f"which: {which!r} is not allowed; expected best or last")
        return load(self.run_dir / "checkpoints" / f"{which}.pt")

    def _table(self, name: str) -> pd.DataFrame:
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(f"Run's tables need pandas: {install_hint('analysis')}") from None
        try:
            return pd.read_csv(self.run_dir / name)
        except (FileNotFoundError, pd.errors.EmptyDataError):
            return pd.DataFrame()


def train(  # noqa: PLR0913 - keyword-only, one per a3c train option it stands for, and the callbacks
    env: str | Callable[[], gym.Env] | None = None,
    *,
    run_dir: str | Path | None = None,
    config_file: str | Path | None = None,
    preset: bool = True,
    force: bool = False,
    serial: bool = False,
    progress: bool | None = None,
    callbacks: Sequence[Any] = (),
    **config: Any,
) -> Run | list[Run]:
    """Train as ``a3c train`` does (the same processes and run dir) and return the run when it ends.

    Args:
        env: a Gymnasium env id (``--env``); or an env factory: a class or a function that returns a
            ``gymnasium.Env``, called with the ``env_kwargs`` (none by default), or its reference
            ``"pkg.module:name"``; None with a ``config_file`` that names one (``env_id``). A factory or a
            wrapper defined in the script or notebook reaches the workers by value (cloudpickle) and is saved
            in the run dir, for ``a3c.load``/``a3c.resume`` in a later Python session.
        run_dir: where the run's files go (default ``runs/<env-id>/<time>-s<seed>``, a factory's own name for
            ``<env-id>``); ``force`` replaces an earlier run there.
        config_file: a TOML file of config values (``--config``).
        preset: False ignores the env's preset (``--no-preset``).
        serial: one worker in this process (``--serial``).
        progress: the live progress line on stdout; None (default): on where it can show live, a terminal or a
            Jupyter notebook (``a3c.training.progress.can_show_live``), off elsewhere (a log file).
        callbacks: objects with any of on_start, on_eval, on_episode, on_metrics, on_end, called in this
            process as the rows arrive; a true return stops the run (``a3c.Callback``, docs/api.md).
        **config: config fields (``a3c config-keys``), e.g. ``lr=3e-4``, ``max_seconds=60``,
            ``env_kwargs={"continuous": True}``; they win over everything else, like ``--set``.
            ``wrappers=[...]``: callables ``env -> env`` (a ``gymnasium.Wrapper`` class, a function) or their
            references, applied in order to every env the run makes (``--wrapper``); saved with the run.
            ``seeds=[0, 1, 2]`` (``--seeds``): one run per seed, one after another, each in
            ``<run_dir>/s<seed>`` (default ``runs/<env-id>/<time>-seeds/s<seed>``); then the result is a
            list of their ``Run``s (up to one that a signal stopped).

    Call it from the main thread (it handles SIGINT and SIGTERM like the command: Ctrl-C or a notebook's
    interrupt stops the run cleanly and returns it); a script that calls it needs an
    ``if __name__ == "__main__":`` guard (its workers are spawned processes).

    Raises:
        BadInput: a bad argument, with the message ``a3c train`` prints after ``error:`` (a ValueError).
        TrainingFailed: the run failed (exit code 1); its files are kept.
    """
    from a3c.core.user_code import register

    if env is None:
        env = config.pop("env_id", None)  # the keyword of earlier versions
    env_id = env if env is None or isinstance(env, str) else register(env, "env_id")
    if config.get("wrappers") is not None:
        wrappers = config["wrappers"]
        wrappers = [wrappers] if isinstance(wrappers, str) or not isinstance(wrappers, Sequence) else wrappers
        config["wrappers"] = [w if isinstance(w, str) else register(w, "wrappers") for w in wrappers]
    if (seeds := config.pop("seeds", None)) is not None:  # not a config field: one run per seed
        return _train_seeds(env_id, seeds, run_dir, dict(config_file=config_file, preset=preset, force=force,
                            serial=serial, progress=progress, callbacks=callbacks, **config))  # fmt: skip
    where = {"run_dir": None if run_dir is None else Path(run_dir), "force": force, "resume": None}
    options = {"no_preset": not preset, "config_file": None if config_file is None else Path(config_file)}
    return _train(env_id, options, config, {**where, "serial": serial}, progress, callbacks)


def _train_seeds(env_id: str | None, seeds: list[int], parent: str | Path | None, kwargs: dict) -> list[Run]:
    """``train(seeds=...)``: ``train(seed=s, run_dir=<parent>/s<s>, **kwargs)`` for each seed in turn, up
    to the first that a signal stopped."""
    from a3c.core.errors import BadInput
    from a3c.training.seeds import check_seeds, seed_run_dir, seeds_dir, stopped_by_signal

    seeds = check_seeds(seeds)
    if "seed" in kwargs:
        raise BadInput("seeds: not allowed with seed; the list gives every run's seed")
    if parent is None:
        if env_id is None and kwargs.get("config_file") is not None:
            from a3c.training.resolve import read_config_file
            from a3c_envs.modules import check_code_modules

            path = Path(kwargs["config_file"])
            env_id = read_config_file(path).get("env_id")
            check_code_modules(env_id, (), None, False, f"--config {str(path)!r}")  # before any import
        if env_id is None:
            raise BadInput("seeds: expected an env_id (or a run_dir for the runs) with a seed list")
        parent = seeds_dir(env_id)
    runs = []
    for seed in seeds:
        runs.append(train(env_id, run_dir=seed_run_dir(Path(parent), seed), seed=seed, **kwargs))
        if stopped_by_signal(runs[-1].exit_code):
            break
    return runs


def resume(
    run_dir: str | Path,
    *,
    serial: bool = False,
    progress: bool | None = None,
    trust_env_module: bool = False,
    trust_code: bool = False,
    callbacks: Sequence[Any] = (),
    **config: Any,
) -> Run:
    """Continue ``run_dir`` from its checkpoints/last.pt, as ``a3c train --resume`` does (counters, CSVs and
    wall time continue); ``config`` values override the saved ones, except the env and the model's shape.
    ``trust_env_module``: ``--trust-env-module``; ``callbacks`` as ``train``'s; ``trust_code``: the objects
    the run was given from a script or notebook unpickled from its ``user_code.pkl``, as ``a3c.load``'s.
    Raises as ``train``."""
    from a3c.api.policy import load_run_code

    if trust_code:
        load_run_code(Path(run_dir))
    where = {"run_dir": None, "force": False, "resume": Path(run_dir), "serial": serial}
    trust = {"trust_env_module": trust_env_module or trust_code}
    return _train(None, trust, config, where, progress, callbacks)


def _train(
    env_id: str | None,
    options: dict[str, Any],
    config: dict[str, Any],
    where: dict[str, Any],
    progress: bool | None,
    callbacks: Sequence[Any] = (),
) -> Run:
    """``train``'s and ``resume``'s run; ``where``: ``train_setup``'s run_dir, force, resume and serial."""
    from a3c.training.options import train_setup
    from a3c.training.progress import can_show_live

    resume, run_dir, serial = where["resume"], where["run_dir"], where["serial"]
    if resume is not None or (where["force"] and run_dir is not None):
        refuse_if_held(resume or run_dir, "resume" if resume is not None else "force")
    if not serial and config.get("backend") != "ray":
        from a3c.runtime.context import start_early

        start_early()
    import torch

    from a3c.training.train import Trainer

    setup = train_setup(env_id, options, config, **where)
    threads = torch.get_num_threads()  # the trainer sets one (invariant 3); the caller gets its own back
    try:
        trainer = Trainer(
            setup.config,
            setup.info,
            setup.run_dir,
            serial=serial,
            force=where["force"],
            show_progress=can_show_live() if progress is None else progress,
            resume=setup.checkpoint,
            callbacks=callbacks,
        )
        run = Run(setup.run_dir, trainer.run())
    finally:
        torch.set_num_threads(threads)
    if run.exit_code == 1:
        raise TrainingFailed(run)
    return run
