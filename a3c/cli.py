"""The ``a3c`` command and its subcommands, click only: bad input → one ``error:`` line, exit 2.

``a3c train``'s config options are made from the Config fields, and its run is set up, in
``a3c.training.options``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

import a3c.core.posix  # noqa: F401 - first of a3c's: on Windows one line naming WSL, not fcntl's traceback
from a3c.core.config import parse_kwargs
from a3c.core.errors import BadInput
from a3c.core.extras import install_hint
from a3c.rundir.lock import refuse_if_held
from a3c.tools.bench.command import bench
from a3c.tools.export import export_command
from a3c.tools.run_commands import plot, runs
from a3c.tools.tune import tune
from a3c.tools.video import record_best, require_video, video_dir, video_flag, video_option
from a3c.training.options import config_options, train_setup
from a3c_envs.modules import TRUST_FLAG, TRUST_HELP


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(package_name="a3c")
def cli() -> None:
    """Asynchronous advantage actor-critic (A3C): lock-free workers on a shared model and shared Adam."""


@cli.command()
@click.option(
    "--env", "env_id", default=None, help="Gymnasium env id, e.g. CartPole-v1 (required unless --resume)."
)
@config_options("workers", "envs_per_worker", "seed", rest=True)  # rest: any new field with an option
@click.option(
    "--seeds",
    "seeds_text",
    default=None,
    metavar="LIST",
    help="One run per seed, one after another, e.g. 0-4 or 0,2,5 (instead of --seed): each in "
    "<run-dir>/s<seed>; `a3c runs <run-dir>` then shows their IQM with its interval.  "
    "[default run dir: runs/<env-id>/<YYYYmmdd-HHMMSS>-seeds]",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the run's files go (with --seeds: the folder of the seeds' run dirs).  "
    "[default: runs/<env-id>/<YYYYmmdd-HHMMSS>-s<seed>]",
)
@click.option("--force", is_flag=True, help="Replace an existing run in --run-dir.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE.toml",
    help="Config values from a TOML file (the preset format; `a3c tune` writes one): over the env's preset, "
    "under the other options and --set.",
)
@click.option(
    "--no-preset", is_flag=True, help="Ignore the env's preset: the defaults derived from the env only."
)
@config_options("max_steps", "max_seconds", "target_return", "eval_interval", "eval_episodes")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any config field (repeatable), e.g. --set lr=3e-4 --set hidden_sizes=128,128. "
    "Keys: see `a3c config-keys`.",
)
@click.option(
    "--env-kwarg",
    "env_kwargs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A keyword argument of every env the run makes (repeatable; the value read as JSON, else text), "
    "e.g. --env-kwarg continuous=true. Saved with the run: a resume keeps it.",
)
@config_options("checkpoint_interval", "hang_timeout")
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    default=None,
    metavar="RUN_DIR",
    help="Continue RUN_DIR from its checkpoints/last.pt (counters, CSVs, wall time continue); "
    "options given here override its config, except env and model shape.",
)
@config_options("tensorboard", "backend", "ray_address")
@click.option(
    "--serial", is_flag=True, help="One worker in this process, no child processes (debugging, tests)."
)
@click.option("--quiet", is_flag=True, help="No live progress display.")
@click.option(TRUST_FLAG, "trust_env_module", is_flag=True, help=TRUST_HELP)
@video_flag
def train(
    env_id: str | None,
    run_dir: Path | None,
    force: bool,
    overrides: tuple[str, ...],
    resume: Path | None,
    serial: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Train on ENV until the target return, a budget, Ctrl-C or SIGTERM.

    Exit codes: 0 finished (solved or budget spent), 1 failure, 2 bad input, 130 SIGINT, 143 SIGTERM, 129
    SIGHUP; with --seeds the highest of the runs' (a signal stops the list: the seeds after it do not start).
    """
    # The Config fields' options (a3c.training.options) come in ``options``, by field name, None where not
    # given.
    # --env-kwarg items → a dict (None: not given); --config goes to train_setup with the options.
    seeds_text = options.pop("seeds_text")  # not a Config field: --seeds runs one config per seed
    env_kwargs = options.pop("env_kwargs")
    options["env_kwargs"] = parse_kwargs(env_kwargs, "--env-kwarg") if env_kwargs else None
    if video := options.pop("video"):  # not a Config field: a resume neither keeps nor refuses it
        require_video()
    if resume is not None or (force and run_dir is not None):  # a live run's dir: refused before any start
        refuse_if_held(resume or run_dir, "--resume" if resume is not None else "--force")
    if not serial and options["backend"] != "ray":  # first: the forkserver imports torch while we do too
        from a3c.runtime.context import start_early

        start_early()
    if seeds_text is not None:
        flags = {"force": force, "serial": serial, "quiet": quiet, "video": bool(video)}
        if resume is not None:
            raise BadInput("--seeds: not allowed with --resume; resume each seed's run dir on its own")
        sys.exit(_train_seeds(env_id, seeds_text, options, overrides, run_dir, flags))
    setup = train_setup(
        env_id,
        options,
        overrides,
        run_dir=run_dir,
        force=force,
        resume=resume,
        serial=serial,
    )
    code = _run(setup, serial, force, quiet)
    sys.exit(_record_video(setup, code) if video else code)


def _record_video(setup: Any, code: int) -> int:
    """``--video``: the best policy's video, recorded after the run, and given to the run's tracker (whose run
    ended with the training) when it has one; the exit code."""
    code = record_best(setup.run_dir, code)
    if code == 0 and setup.config.track != "none":
        from a3c.training.trackers import log_videos

        code = log_videos(setup.run_dir, setup.config.track)
    return code


def _train_seeds(
    env_id: str | None,
    seeds_text: str,
    options: dict[str, Any],
    overrides: tuple[str, ...],
    parent: Path | None,
    flags: dict[str, bool],
) -> int:
    """``a3c train --seeds``: every seed's run set up first (bad input leaves nothing behind), then each run
    in turn, in ``<parent>/s<seed>``; the highest exit code. One after another, not side by side: each run's
    workers already take a CPU each (docs/cli.md has the measurement). ``flags``: force, serial, quiet,
    video."""
    from a3c.core.config import parse_set
    from a3c.training.seeds import parse_seeds, seed_run_dir, seeds_dir, stopped_by_signal, worst_exit

    seeds = parse_seeds(seeds_text)
    if options.get("seed") is not None or "seed" in parse_set(overrides):
        raise BadInput("--seeds: not allowed with --seed or --set seed=...; the list gives every run's seed")
    force, serial = flags["force"], flags["serial"]
    setups = []
    for seed in seeds:
        where = None if parent is None else seed_run_dir(parent, seed)
        setup = train_setup(env_id, {**options, "seed": seed}, overrides, run_dir=where, force=force,
                            resume=None, serial=serial)  # fmt: skip
        if parent is None:  # the env id is the resolved one (a --config file's, a registered name)
            parent = seeds_dir(setup.info.env_id)
            setup = setup._replace(run_dir=seed_run_dir(parent, seed))
        setups.append(setup)
    codes = []
    for setup in setups:
        code = _run(setup, serial, force, flags["quiet"])
        codes.append(_record_video(setup, code) if flags["video"] else code)
        if stopped_by_signal(code):
            break
    listed = " ".join(f"s{seed}={code}" for seed, code in zip(seeds, codes, strict=False))
    print(f"seeds: {len(codes)} of {len(seeds)} runs in {parent} (exit codes {listed}); "
          f"`a3c runs {parent}` shows their IQM", file=sys.stderr)  # fmt: skip
    return worst_exit(codes)


def _run(setup: Any, serial: bool, force: bool, quiet: bool) -> int:
    """One run of ``setup`` (a TrainSetup), with the notes ``a3c train`` prints first; its exit code."""
    from a3c.core.cpus import SPARE_CPU_ABOVE
    from a3c.training.train import Trainer

    trainer = Trainer(
        setup.config,
        setup.info,
        setup.run_dir,
        serial=serial,
        force=force,
        show_progress=not quiet,
        resume=setup.checkpoint,
    )
    if setup.skipped_preset and not quiet:
        print(
            f"preset: {setup.config.env_id}'s is not used: it is for the env's default spaces, which the env "
            "kwargs or wrappers change",
            file=sys.stderr,
        )
    if setup.auto_workers and not quiet:  # once the run dir exists: bad input stays one line
        print(
            f"workers: {setup.config.workers} (auto: one per CPU this process may use, "
            f"less one above {SPARE_CPU_ABOVE}; --workers N to choose)",
            file=sys.stderr,
        )
    return trainer.run()


@cli.command()
@click.argument("target", type=click.Path(path_type=Path), metavar="RUN_DIR|CHECKPOINT")
@click.option("--episodes", type=int, default=10, help="Greedy episodes to play.")
@click.option("--seed", type=int, default=12345, help="Seed of the evaluation episodes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(TRUST_FLAG, "trust_env_module", is_flag=True, help=TRUST_HELP)
@video_option
def evaluate(target: Path, episodes: int, seed: int, as_json: bool, **flags: Any) -> None:
    """Play greedy episodes with a checkpoint (a run dir: its checkpoints/best.pt) and report the return."""
    from a3c.rundir.checkpoints import load_policy
    from a3c.tools.evaluate import check_episodes_and_seed, evaluate_policy

    check_episodes_and_seed(episodes, seed)
    video = flags["video"]
    folder = None if video is None else video_dir(video)  # the extra and the folder, before any work
    saved = load_policy(target, flags["trust_env_module"])
    result = evaluate_policy(saved, episodes, seed, folder)
    path, config, videos = saved.path, saved.config, result.get("videos", [])
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"{config.env_id}: mean return {result['mean_return']:.2f} ± {result['std_return']:.2f} "
            f"over {episodes} episodes (min {result['min_return']:.1f}, max {result['max_return']:.1f}) "
            f"— {path}"
        )
        for v in videos:
            click.echo(f"video: {v['path']} (return {v['return']:.1f}, length {v['length']})")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per preset instead of a table.")
def envs(as_json: bool) -> None:
    """The envs with a preset: their target return, the extra they need and whether it is installed. Any
    other Gymnasium env trains too, with defaults derived from its spaces."""
    import dataclasses

    from a3c_envs.presets import list_presets

    presets = list_presets()
    if as_json:
        for preset in presets:
            click.echo(json.dumps(dataclasses.asdict(preset)))
        return
    click.echo(f"{'env':<28} {'target':>8}  {'extra':<8} installed")
    for p in presets:
        target = "-" if p.target_return is None else f"{p.target_return:g}"
        extra = p.extra or "-"
        installed = "yes" if p.installed else f"no: {install_hint(p.extra)}"
        click.echo(f"{p.env_id:<28} {target:>8}  {extra:<8} {installed}")


@cli.command("config-keys")
def config_keys() -> None:
    """List every config field that --set accepts, with its default and help."""
    from dataclasses import MISSING, fields

    from a3c.core.config import Config

    for f in fields(Config):
        if f.name == "env_id":
            continue
        default = f.default if f.default is not MISSING else "-"
        if f.default_factory is not MISSING:
            default = f.default_factory()
        click.echo(f"{f.name:<16} {default!s:<10} {f.metadata.get('help', '')}")


cli.add_command(runs)  # a3c runs and a3c plot: in a3c.tools.run_commands
cli.add_command(plot)
cli.add_command(bench)  # a3c bench: its options live in a3c.tools.bench.command
cli.add_command(tune)  # a3c tune: its options and logic live in a3c.tools.tune
cli.add_command(export_command)  # a3c export: its logic lives in a3c.tools.export


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the click group; turn bad input of any kind into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="a3c", standalone_mode=False)
    except BadInput as exc:  # EnvSetupError is one
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
