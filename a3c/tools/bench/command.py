"""``a3c bench``: the CartPole bench (time to solve, throughput, cost breakdown), or, with ``--env`` or
``--suite``, a race on any envs: ours against Stable-Baselines3 A2C, the same wall-clock budget per run."""

from __future__ import annotations

from pathlib import Path

import click

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint


def _require_sb3() -> None:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        raise BadInput(
            f"bench: needs stable-baselines3 for the peer; install the extra: {install_hint('bench')} "
            "(make bench does)"
        ) from None


def _positive(name: str, value: float, integer: bool = False) -> None:
    if integer and value < 1:
        raise BadInput(f"{name}: {value} is not allowed; expected an integer >= 1")
    if not value > 0:
        raise BadInput(f"{name}: {value} is not allowed; expected a number > 0")


@click.command()
@click.option("--seeds", type=int, default=None, help="Seeds per side.  [default: 5; races: 3]")
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
@click.option(
    "--env",
    "env_ids",
    multiple=True,
    default=None,
    help="Race on this env (repeatable).  [default: none: the CartPole bench]",
)
@click.option(
    "--suite",
    is_flag=True,
    help="Race on the suite (CartPole, Acrobot, Pendulum, LunarLander, HalfCheetah, Hopper, and Catch "
    "registered by its module): ours with --no-preset, SB3 with its defaults.",
)
@click.option("--budget", type=float, default=300.0, show_default=True, help="Races: seconds per run.")
@click.option(
    "--peer",
    type=click.Choice(["default", "zoo", "no-preset"]),
    default=None,
    help="Races: SB3 A2C's default settings or the RL-Zoo's; or no-preset: ours on derived defaults, "
    "against ours with its presets.  [default: zoo; default with --suite]",
)
@click.option("--no-preset", is_flag=True, help="Races: ours on derived defaults, its presets disabled.")
@click.option(
    "--backends",
    "backends_env",
    default=None,
    metavar="ENV",
    help="Instead: the local and Ray (node mode) backends side by side on ENV's preset, --repeats "
    "alternating pairs of --seconds each (extra `ray`).  [default: none]",
)
@click.option(
    "--shard-load",
    is_flag=True,
    help="Instead: load-test the Ray node mode's shards with fake node syncers (no envs), one row per "
    "--shards x --nodes x --intervals (extra `ray`).",
)
@click.option(
    "--shards", "shard_counts", default="1,2", show_default=True, help="--shard-load: shard counts."
)
@click.option(
    "--nodes", "node_counts", default="1,2,4,8", show_default=True, help="--shard-load: node counts."
)
@click.option("--intervals", default="1,0.25", show_default=True, help="--shard-load: sync intervals (s).")
@click.option(
    "--model",
    type=click.Choice(["mlp", "atari"]),
    default="mlp",
    show_default=True,
    help="--shard-load: CartPole-v1's MLP or ALE/Pong-v5's conv net + LSTM (extra `atari`).",
)
@click.option(
    "--gpu",
    is_flag=True,
    help="Instead: the device check on ALE/Pong-v5's preset (make bench-gpu): the CUDA tests, steps/s with "
    "--worker-counts on the CPU and --gpu-workers on the GPU, the GPU's memory per process and a short "
    'learning check; without CUDA the CPU runs only (docs/performance.md, "The GPU check").',
)
@click.option(
    "--worker-counts", default="1,2,4,8,15", show_default=True, help="--gpu: the CPU runs' worker counts."
)
@click.option("--gpu-workers", type=int, default=15, show_default=True, help="--gpu: workers of the GPU run.")
@click.option(
    "--learn-seconds", type=float, default=120.0, show_default=True, help="--gpu: length of the GPU run."
)
@click.option(
    "--commit",
    default=None,
    help="--gpu: the commit measured where the tree has no git (a device's copy; .whl/COMMIT).  [default: "
    "git's]",
)
def bench(**opts) -> None:
    """Ours against Stable-Baselines3 A2C, side by side. Without --env/--suite: CartPole-v1's time to solve,
    throughput and where one worker's time goes. With them: a race per env (the same wall-clock budget per
    run; solved seeds, median time and steps to the target, final greedy return, steps/s); with --peer
    no-preset the other side is ours on derived defaults (do the presets beat them?). Prints a
    markdown table; writes JSON under OUT. Needs the `bench` extra. With --shard-load: the Ray backend's
    parameter shards' exchanges/s, round trips and CPU per shards x nodes x intervals, --seconds each (extra
    `ray`)."""
    _positive("--seconds", opts["seconds"])
    if opts["backends_env"]:
        _backends(opts)
        return
    if opts["shard_load"]:
        _shard_load(opts)
        return
    if opts["gpu"]:
        _gpu(opts)
        return
    racing = bool(opts["env_ids"] or opts["suite"])
    if opts["peer"] == "no-preset" and not racing:
        raise BadInput("--peer: 'no-preset' is not allowed without --env (the CartPole bench races SB3); "
                       "expected default or zoo")  # fmt: skip
    if opts["peer"] != "no-preset":
        _require_sb3()
    _positive("--repeats", opts["repeats"], integer=True)
    if opts["seeds"] is not None:
        _positive("--seeds", opts["seeds"], integer=True)
    if racing:
        _race(opts)
        return
    from a3c.tools.bench.harness import run_bench
    from a3c.tools.bench.plan import BenchPlan

    results = run_bench(
        BenchPlan(seeds=opts["seeds"] or 5, seconds=opts["seconds"], repeats=opts["repeats"]), opts["out"]
    )
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}  ({results['bench_s']:.0f} s)")


def _race(opts: dict) -> None:
    import tempfile

    from a3c.tools.bench.race import SUITE, RacePlan, run_race
    from a3c_envs import inspect_env, load_preset

    _positive("--budget", opts["budget"])
    env_ids = tuple(opts["env_ids"]) + (SUITE if opts["suite"] else ())
    peer = opts["peer"] or ("default" if opts["suite"] else "zoo")
    if peer == "no-preset" and (opts["no_preset"] or opts["suite"]):
        flag = "--suite" if opts["suite"] else "--no-preset"
        raise BadInput(f"--peer: 'no-preset' is not allowed with {flag} (both sides would be alike); "
                       "expected default or zoo")  # fmt: skip
    for env_id in env_ids:
        inspect_env(env_id)  # an unknown id is bad input before anything runs
        if peer == "no-preset" and load_preset(env_id) is None:
            raise BadInput(
                f"--env: {env_id!r} has no preset, so --peer no-preset would race its derived defaults "
                "against themselves; expected an env with a preset (a3c envs lists them)"
            )
    plan = RacePlan(env_ids, opts["seeds"] or 3, opts["budget"], peer, opts["no_preset"] or opts["suite"])
    with tempfile.TemporaryDirectory(prefix="a3c-race-") as tmp:
        results = run_race(plan, opts["out"], Path(tmp))
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}")


def _backends(opts: dict) -> None:
    from a3c.tools.bench.backends import compare_backends
    from a3c_envs import inspect_env

    if opts["env_ids"] or opts["suite"] or opts["shard_load"]:
        raise BadInput("--backends: not allowed with --env, --suite or --shard-load; expected one mode")
    _positive("--repeats", opts["repeats"], integer=True)
    inspect_env(opts["backends_env"])  # an unknown id is bad input before anything runs
    results = compare_backends(opts["backends_env"], opts["seconds"], opts["repeats"], opts["out"])
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}")


def _shard_load(opts: dict) -> None:
    from a3c.tools.bench.shard_load import shard_load

    if opts["env_ids"] or opts["suite"]:
        raise BadInput("--shard-load: not allowed with --env or --suite; expected one mode")
    results = shard_load(opts)
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}")


def _gpu(opts: dict) -> None:
    from a3c.tools.bench.gpu import GpuPlan, run_gpu_bench
    from a3c.tools.bench.shard_load import parse_list
    from a3c_envs import inspect_env

    if opts["env_ids"] or opts["suite"] or opts["backends_env"] or opts["shard_load"]:
        raise BadInput(
            "--gpu: not allowed with --env, --suite, --backends or --shard-load; expected one mode"
        )
    _positive("--gpu-workers", opts["gpu_workers"], integer=True)
    _positive("--learn-seconds", opts["learn_seconds"])
    plan = GpuPlan(
        worker_counts=parse_list("--worker-counts", opts["worker_counts"], int),
        seconds=opts["seconds"],
        gpu_workers=opts["gpu_workers"],
        learn_seconds=opts["learn_seconds"],
    )
    inspect_env("ALE/Pong-v5")  # without the atari extra: one line naming it, before anything runs
    results = run_gpu_bench(plan, opts["out"], opts["commit"])
    click.echo(results["markdown"])
    click.echo(f"\nJSON: {results['path']}  ({results['bench_s']:.0f} s)")
