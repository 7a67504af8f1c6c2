"""``a3c.train`` and ``a3c.resume``: a training run from Python, the run ``a3c train`` makes; ``Run``: its
files read back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.api.policy import Policy, load
from a3c.rundir.lock import refuse_if_held

if TYPE_CHECKING:
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
    143 SIGTERM). Its files (docs/runs.md) are read when asked for, so a ``Run`` of a run still going on
    shows its rows so far."""

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
            raise ImportError("Run's tables need pandas: pip install 'a3c[analysis]'") from None
        try:
            return pd.read_csv(self.run_dir / name)
        except (FileNotFoundError, pd.errors.EmptyDataError):
            return pd.DataFrame()


def train(  # noqa: PLR0913 - keyword-only, one per a3c train option it stands for, and the callbacks
    env_id: str | None = None,
    *,
    run_dir: str | Path | None = None,
    config_file: str | Path | None = None,
    preset: bool = True,
    force: bool = False,
    serial: bool = False,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    **config: Any,
) -> Run:
    """Train as ``a3c train`` does (the same processes and run dir) and return the run when it ends.

    Args:
        env_id: a Gymnasium env id (``--env``); None with a ``config_file`` that names one (``env_id``).
        run_dir: where the run's files go (default ``runs/<env-id>/<time>-s<seed>``); ``force`` replaces an
            earlier run there.
        config_file: a TOML file of config values (``--config``).
        preset: False ignores the env's preset (``--no-preset``).
        serial: one worker in this process (``--serial``); ``progress``: the live line on stderr.
        callbacks: objects with any of on_start, on_eval, on_episode, on_metrics, on_end, called in this
            process as the rows arrive; a true return stops the run (``a3c.Callback``, docs/api.md).
        **config: config fields (``a3c config-keys``), e.g. ``lr=3e-4``, ``max_seconds=60``,
            ``env_kwargs={"continuous": True}``; they win over everything else, like ``--set``.

    Call it from the main thread (it handles SIGINT and SIGTERM like the command: Ctrl-C or a notebook's
    interrupt stops the run cleanly and returns it); a script that calls it needs an
    ``if __name__ == "__main__":`` guard (its workers are spawned processes).

    Raises:
        BadInput: a bad argument, with the message ``a3c train`` prints after ``error:`` (a ValueError).
        TrainingFailed: the run failed (exit code 1); its files are kept.
    """
    where = {"run_dir": None if run_dir is None else Path(run_dir), "force": force, "resume": None}
    options = {"no_preset": not preset, "config_file": None if config_file is None else Path(config_file)}
    return _train(env_id, options, config, {**where, "serial": serial}, progress, callbacks)


def resume(
    run_dir: str | Path,
    *,
    serial: bool = False,
    progress: bool = False,
    trust_env_module: bool = False,
    callbacks: Sequence[Any] = (),
    **config: Any,
) -> Run:
    """Continue ``run_dir`` from its checkpoints/last.pt, as ``a3c train --resume`` does (counters, CSVs and
    wall time continue); ``config`` values override the saved ones, except the env and the model's shape.
    ``trust_env_module``: ``--trust-env-module``; ``callbacks`` as ``train``'s. Raises as ``train``."""
    where = {"run_dir": None, "force": False, "resume": Path(run_dir), "serial": serial}
    return _train(None, {"trust_env_module": trust_env_module}, config, where, progress, callbacks)


def _train(
    env_id: str | None,
    options: dict[str, Any],
    config: dict[str, Any],
    where: dict[str, Any],
    progress: bool,
    callbacks: Sequence[Any] = (),
) -> Run:
    """``train``'s and ``resume``'s run; ``where``: ``train_setup``'s run_dir, force, resume and serial."""
    from a3c.training.options import train_setup

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
            show_progress=progress,
            resume=setup.checkpoint,
            callbacks=callbacks,
        )
        run = Run(setup.run_dir, trainer.run())
    finally:
        torch.set_num_threads(threads)
    if run.exit_code == 1:
        raise TrainingFailed(run)
    return run
