"""The ``a3c`` command: ``a3c train`` and ``a3c evaluate``. Bad input → one ``error:`` line, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from a3c.core.errors import BadInput
from envs import EnvSetupError

BAD_INPUT = (BadInput, EnvSetupError)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(package_name="a3c")
def cli() -> None:
    """Asynchronous advantage actor-critic (A3C): lock-free workers on a shared model and shared Adam."""


PRESET = "[default: the env's preset, else {}]"


@cli.command()
@click.option(
    "--env", "env_id", default=None, help="Gymnasium env id, e.g. CartPole-v1 (required unless --resume)."
)
@click.option("--workers", type=int, default=None, help="Worker processes. " + PRESET.format(2))
@click.option(
    "--envs-per-worker",
    type=int,
    default=None,
    help="Envs each worker steps as one batch. " + PRESET.format(1),
)
@click.option("--seed", type=int, default=None, help="Seed of every random stream of the run.  [default: 0]")
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the run's files go.  [default: runs/<env-id>/<YYYYmmdd-HHMMSS>-s<seed>]",
)
@click.option("--force", is_flag=True, help="Replace an existing run in --run-dir.")
@click.option(
    "--max-steps", type=int, default=None, help="Stop after this many env steps.  [default: no limit]"
)
@click.option(
    "--max-seconds", type=float, default=None, help="Stop after this many seconds.  [default: no limit]"
)
@click.option(
    "--target-return",
    type=float,
    default=None,
    help="Stop when the evaluator's mean return reaches this. "
    "[default: the preset's, else the env spec's reward_threshold]",
)
@click.option(
    "--eval-interval", type=float, default=None, help="Seconds between evaluations. " + PRESET.format(2.0)
)
@click.option(
    "--eval-episodes", type=int, default=None, help="Greedy episodes per evaluation. " + PRESET.format(10)
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any config field (repeatable), e.g. --set lr=3e-4 --set hidden_sizes=128,128. "
    "Keys: see `a3c config-keys`.",
)
@click.option(
    "--checkpoint-interval",
    type=float,
    default=None,
    help="Seconds between checkpoints (checkpoints/last.pt; --set keep_checkpoints=N older ones kept).  "
    "[default: 60]",
)
@click.option(
    "--hang-timeout",
    type=float,
    default=None,
    help="A child silent (no heartbeat) this many seconds counts as crashed and is restarted.  [default: 60]",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    default=None,
    metavar="RUN_DIR",
    help="Continue RUN_DIR from its checkpoints/last.pt (counters, CSVs, wall time continue); "
    "options given here override its config, except env and model shape.",
)
@click.option(
    "--tensorboard", is_flag=True, help="Also write TensorBoard event files to RUN_DIR/tensorboard (extra)."
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default=None,
    help="local: processes on this machine (default); ray: actors on a Ray cluster (extra `ray`).",
)
@click.option(
    "--ray-address",
    default=None,
    help="With --backend ray: the cluster to join (auto or HOST:PORT); none starts one.",
)
@click.option(
    "--serial", is_flag=True, help="One worker in this process, no child processes (debugging, tests)."
)
@click.option("--quiet", is_flag=True, help="No live progress display.")
def train(
    env_id: str | None,
    workers: int | None,
    envs_per_worker: int | None,
    seed: int | None,
    run_dir: Path | None,
    force: bool,
    max_steps: int | None,
    max_seconds: float | None,
    target_return: float | None,
    eval_interval: float | None,
    eval_episodes: int | None,
    overrides: tuple[str, ...],
    checkpoint_interval: float | None,
    hang_timeout: float | None,
    resume: Path | None,
    tensorboard: bool,
    backend: str | None,
    ray_address: str | None,
    serial: bool,
    quiet: bool,
) -> None:
    """Train on ENV until the target return, a budget, Ctrl-C or SIGTERM.

    Exit codes: 0 finished (solved or budget spent), 1 failure, 2 bad input, 130 SIGINT, 143 SIGTERM.
    """
    if not serial and backend != "ray":  # first: the forkserver imports torch while this process does too
        from a3c.runtime.context import start_early

        start_early()
    from a3c.core.config import parse_set
    from a3c.resolve import resolve_config
    from a3c.run.rundir import check_run_dir, default_run_dir
    from a3c.trainer import Trainer
    from envs import inspect_env

    if serial and workers not in (None, 1):
        raise BadInput(f"--workers: {workers} is not allowed with --serial; expected 1")
    parsed = parse_set(overrides)
    options = {
        "workers": 1 if serial else workers,
        "envs_per_worker": envs_per_worker,
        "seed": seed,
        "max_steps": max_steps,
        "max_seconds": max_seconds,
        "target_return": target_return,
        "eval_interval": eval_interval,
        "eval_episodes": eval_episodes,
        "checkpoint_interval": checkpoint_interval,
        "hang_timeout": hang_timeout,
        "tensorboard": True if tensorboard else None,
        "backend": backend,
        "ray_address": ray_address,
    }
    if resume is not None:
        if run_dir is not None or force:
            raise BadInput("--resume: RUN_DIR is the run dir; --run-dir and --force are not allowed with it")
        config, info, checkpoint = _resume_config(resume, env_id, options, parsed)
        run_dir = resume
    elif env_id is None:
        raise BadInput("--env: missing; expected a Gymnasium env id (or --resume RUN_DIR)")
    else:
        info = inspect_env(env_id)
        config = resolve_config(info, options, parsed)
        checkpoint = None
        run_dir = run_dir or default_run_dir(info.env_id, config.seed)
        check_run_dir(run_dir, force)
    if serial and config.workers != 1:
        raise BadInput(f"workers: {config.workers} is not allowed with --serial; expected 1")
    if config.backend == "ray":
        if serial:
            raise BadInput("--serial: not allowed with --backend ray; expected the local backend")
        if config.obs_norm:
            raise BadInput(
                "obs_norm: true is not allowed with --backend ray yet; expected false, or --backend local"
            )
        try:
            import ray  # noqa: F401
        except ImportError:
            raise BadInput(
                "--backend: ray needs the `ray` extra, which is not installed; install it with "
                "pip install -e '.[ray]' (or pip install 'ray>=2.40')"
            ) from None
    if config.tensorboard:
        from a3c.run.tensorboard import check_available

        check_available()
    trainer = Trainer(
        config, info, run_dir, serial=serial, force=force, show_progress=not quiet, resume=checkpoint
    )
    sys.exit(trainer.run())


def _resume_config(run_dir: Path, env_id: str | None, options: dict, overrides: dict):
    """The config, env and checkpoint of a resume; anything that does not fit is BadInput (exit 2)."""
    import json

    from a3c.core.config import Config
    from a3c.core.spaces import Spaces
    from a3c.run.resume import check_compatible, load_resume_checkpoint
    from envs import inspect_env

    checkpoint = load_resume_checkpoint(run_dir)
    saved = Config.from_dict(checkpoint["config"])
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
    info = inspect_env(saved.env_id)
    try:
        saved_spaces = Spaces.of_checkpoint(checkpoint)
    except (KeyError, TypeError, ValueError):
        raise BadInput(
            "--resume: checkpoints/last.pt does not say which spaces its model was built for"
        ) from None
    if info.spaces != saved_spaces:
        raise BadInput(f"--resume: the checkpoint's model does not fit {saved.env_id}'s spaces")
    values = {**saved.to_dict(), **{k: v for k, v in options.items() if v is not None}, **overrides}
    config = Config(**values).validate()
    check_compatible(checkpoint, config, run_dir)
    return config, info, checkpoint


@cli.command()
@click.argument("target", type=click.Path(path_type=Path), metavar="RUN_DIR|CHECKPOINT")
@click.option("--episodes", type=int, default=10, help="Greedy episodes to play.")
@click.option("--seed", type=int, default=12345, help="Seed of the evaluation episodes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def evaluate(target: Path, episodes: int, seed: int, as_json: bool) -> None:
    """Play greedy episodes with a checkpoint (a run dir: its checkpoints/best.pt) and report the return."""
    from a3c.run.checkpoints import load_policy

    if episodes < 1:
        raise BadInput(f"--episodes: {episodes} is not allowed; expected an integer >= 1")
    if not 0 <= seed < 2**31 - episodes:
        raise BadInput(f"--seed: {seed} is not allowed; expected an integer in [0, 2**31 - episodes)")
    saved = load_policy(target)
    path, config = saved.path, saved.config
    returns, lengths = saved.play(episodes, seed)
    result = {
        "checkpoint": str(path),
        "env_id": config.env_id,
        "episodes": episodes,
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "min_return": float(returns.min()),
        "max_return": float(returns.max()),
        "mean_length": float(lengths.mean()),
        "seed": seed,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"{config.env_id}: mean return {result['mean_return']:.2f} ± {result['std_return']:.2f} "
            f"over {episodes} episodes (min {result['min_return']:.1f}, max {result['max_return']:.1f}) "
            f"— {path}"
        )


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per preset instead of a table.")
def envs(as_json: bool) -> None:
    """The envs with a preset: their target return, the extra they need and whether it is installed. Any
    other Gymnasium env trains too, with defaults derived from its spaces."""
    import dataclasses

    from envs.presets import list_presets

    presets = list_presets()
    if as_json:
        for preset in presets:
            click.echo(json.dumps(dataclasses.asdict(preset)))
        return
    click.echo(f"{'env':<28} {'target':>8}  {'extra':<8} installed")
    for p in presets:
        target = "-" if p.target_return is None else f"{p.target_return:g}"
        extra = p.extra or "-"
        installed = "yes" if p.installed else f"no: pip install -e '.[{p.extra}]'"
        click.echo(f"{p.env_id:<28} {target:>8}  {extra:<8} {installed}")


@cli.command()
@click.option("--seeds", type=int, default=5, show_default=True, help="Time-to-solve runs per side.")
@click.option(
    "--seconds",
    type=float,
    default=20.0,
    show_default=True,
    help="Length of each throughput run (after warm-up).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("bench/results"),
    show_default=True,
    help="Folder for the JSON results.",
)
@click.option("--repeats", type=int, default=2, show_default=True, help="Runs of each throughput setting.")
def bench(seeds: int, seconds: float, out: Path, repeats: int) -> None:
    """Ours against Stable-Baselines3 A2C on CartPole-v1, side by side: time to solve, throughput, and where
    one worker's time goes. Prints a markdown table; writes JSON under OUT. Needs the `bench` extra."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        raise BadInput(
            "bench: needs stable-baselines3 for the peer; install the extra: pip install -e '.[bench]' "
            "(make bench does)"
        ) from None
    if seeds < 1:
        raise BadInput(f"--seeds: {seeds} is not allowed; expected an integer >= 1")
    if not seconds > 0:
        raise BadInput(f"--seconds: {seconds} is not allowed; expected a number > 0")
    if repeats < 1:
        raise BadInput(f"--repeats: {repeats} is not allowed; expected an integer >= 1")
    from a3c.bench.harness import BenchPlan, run_bench

    results = run_bench(BenchPlan(seeds=seeds, seconds=seconds, repeats=repeats), out)
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}  ({results['bench_s']:.0f} s)")


def _analysis():
    """a3c.analysis, or BadInput naming the extra to install."""
    try:
        import a3c.analysis as analysis
    except ImportError as exc:
        raise BadInput(f"{exc.name} is not installed; pip install 'a3c[analysis]'") from None
    return analysis


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path), default=Path("runs"), required=False)
def runs(directory: Path) -> None:
    """The runs under DIRECTORY (default runs/): env, seed, start, steps, wall, best eval, solved."""
    analysis = _analysis()
    try:
        table = analysis.runs_table(analysis.load_runs(directory))
    except FileNotFoundError:
        raise BadInput(
            f"DIRECTORY: no run directories (with a config.json) under {str(directory)!r}"
        ) from None
    click.echo(table.to_string(index=False))


@cli.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_OR_DIR...")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Image to write (.png, .pdf, .svg).",
)
@click.option(
    "--x", "x_axis", type=click.Choice(["steps", "time"]), default="steps", help="The x axis of the curves."
)
def plot(sources: tuple[Path, ...], output: Path, x_axis: str) -> None:
    """Learning curves (eval mean with a 95% CI band across seeds, smoothed training returns), throughput and
    policy lag of one or more runs, as one figure."""
    analysis = _analysis()
    if output.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise BadInput(f"--output: {str(output)!r} is not allowed; expected a .png, .pdf or .svg file")
    if not output.parent.is_dir():
        raise BadInput(f"--output: the folder {str(output.parent)!r} does not exist")
    try:
        loaded = analysis.load_runs(list(sources))
    except FileNotFoundError:
        raise BadInput(
            f"RUN_OR_DIR: no run directories (with a config.json) in {[str(s) for s in sources]}"
        ) from None
    path = analysis.plot_runs(loaded, output, x=x_axis)
    click.echo(f"wrote {path} ({len(loaded.paths)} runs)")


@cli.command("config-keys")
def config_keys() -> None:
    """List every config field that --set accepts, with its default and help."""
    from dataclasses import MISSING, fields

    from a3c.core.config import Config

    for f in fields(Config):
        if f.name == "env_id":
            continue
        default = f.default if f.default is not MISSING else "-"
        click.echo(f"{f.name:<16} {default!s:<10} {f.metadata.get('help', '')}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the click group; turn bad input of any kind into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="a3c", standalone_mode=False)
    except BAD_INPUT as exc:
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
